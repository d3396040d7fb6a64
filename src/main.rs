mod alloc;

fn main() {
    // The allocator's options are read before this; naming them keeps them linked.
    let _ = alloc::options();
    #[cfg(feature = "dhat-heap")]
    let profiler = dhat::Profiler::new_heap();
    let code = nsys_jax_pipe::cli::main();
    // The profile is written when the profiler is dropped, before the process exits.
    #[cfg(feature = "dhat-heap")]
    drop(profiler);
    nsys_jax_pipe::interrupt::exit(code);
}
