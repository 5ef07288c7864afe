fn main() { println!("nmpsim"); }
