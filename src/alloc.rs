//! The process's memory allocator: jemalloc, asked to back its memory with transparent huge
//! pages where the kernel grants them on request (`madvise` mode, the usual default).
//!
//! A cold run touches most of its memory once: xz dictionaries and outputs, Arrow builders,
//! decoded HLO. With 4 KiB pages each first touch is a page fault; on the four pax archives
//! glibc's allocator took some 24,000 of them, and jemalloc with huge pages some 3,500 (see
//! docs/design.md, "The cold path", for the measurements). jemalloc replaces `malloc` for the
//! whole process, so liblzma's dictionaries come from it too. One arena per CPU keeps the
//! memory that one thread frees for the next task on that CPU. jemalloc's own metadata takes
//! huge pages only once it is large (`auto`): on pax, 10 MiB less peak memory, no slower.

#[cfg(not(feature = "dhat-heap"))]
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// A heap-profiling build (`--features dhat-heap`): every allocation is recorded with its
/// call stack, and the sites holding memory at the peak are written to `dhat-heap.json`.
#[cfg(feature = "dhat-heap")]
#[global_allocator]
static GLOBAL: dhat::Alloc = dhat::Alloc;

/// A C string that jemalloc reads before `main`.
#[repr(transparent)]
pub struct MallocConf(*const std::ffi::c_char);

// SAFETY: it points at a string literal, which is immutable and lives for the whole process.
unsafe impl Sync for MallocConf {}

/// jemalloc's options, read at its first allocation (the `MALLOC_CONF` environment variable,
/// read after this, can still change them).
#[unsafe(no_mangle)]
#[used]
pub static malloc_conf: MallocConf =
    MallocConf(c"thp:always,metadata_thp:auto,percpu_arena:percpu".as_ptr());

/// The options in force (keeps [`malloc_conf`] linked into every binary).
pub fn options() -> &'static std::ffi::CStr {
    // SAFETY: `malloc_conf` points at a NUL-terminated literal.
    unsafe { std::ffi::CStr::from_ptr(std::hint::black_box(&malloc_conf).0) }
}
