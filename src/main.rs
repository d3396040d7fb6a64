fn main() {
    std::process::exit(nsys_jax_pipe::cli::main());
}
