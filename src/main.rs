mod alloc;

fn main() {
    // The allocator's options are read before this; naming them keeps them linked.
    let _ = alloc::options();
    nsys_jax_pipe::interrupt::exit(nsys_jax_pipe::cli::main());
}
