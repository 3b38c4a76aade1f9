fn main() {
    println!("render-pod {}", env!("CARGO_PKG_VERSION"));
}
