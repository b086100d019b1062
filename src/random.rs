//! 128-bit random identifiers from the OS: session ids, task ids, session owners. Each is
//! a bearer capability (or stands in for one until authentication exists), so it is never
//! guessable and never derived from anything else.

/// 128 random bits as 32 lowercase hex digits.
pub fn id128() -> String {
    let mut b = [0u8; 16];
    getrandom::fill(&mut b).expect("the OS random source works");
    let mut s = String::with_capacity(32);
    for x in b {
        s.push(char::from_digit(u32::from(x >> 4), 16).expect("a nibble"));
        s.push(char::from_digit(u32::from(x & 15), 16).expect("a nibble"));
    }
    s
}

#[cfg(test)]
mod tests {
    #[test]
    fn ids_are_32_hex_digits_and_differ() {
        let (a, b) = (super::id128(), super::id128());
        assert_eq!(a.len(), 32);
        assert!(a.bytes().all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()));
        assert_ne!(a, b);
    }
}
