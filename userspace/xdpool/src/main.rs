fn main() {
    println!("xdpool: under construction");
}
