"""Foundation: errors, atomic writes, serde-exact JSON and Rust-compatible text helpers, URL display."""
