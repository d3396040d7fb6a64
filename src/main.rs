fn main() {
    nsys_jax_pipe::interrupt::exit(nsys_jax_pipe::cli::main());
}
