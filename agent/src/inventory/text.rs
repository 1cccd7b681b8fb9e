//! Text from outside — object names, owner references, kubelet's messages,
//! device names — made safe to show: no control character and no
//! bidirectional override reaches a terminal, a table, an Event note or a
//! remediation note. A tenant can name things and write Events; an operator
//! reads `ipshadow check` on a terminal, where an escape sequence in a pod's
//! controller name could clear the screen or write the clipboard (OSC 52), and
//! a right-to-left override could make a note read other than it is.

use std::borrow::Cow;

/// Whether `c` must not be shown as is: C0 and C1 controls and DEL (Unicode
/// category Cc), the bidirectional marks, embeddings, overrides and isolates,
/// and the line and paragraph separators (a line break a table does not expect).
pub fn is_unsafe(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{061c}'
                | '\u{200e}'
                | '\u{200f}'
                | '\u{202a}'..='\u{202e}'
                | '\u{2066}'..='\u{2069}'
                | '\u{2028}'
                | '\u{2029}'
        )
}

/// `s` with every unsafe character replaced: a space for whitespace (tab,
/// newline, the separators), U+FFFD for the rest, so a removed character still
/// shows that something was there.
pub fn clean(s: &str) -> Cow<'_, str> {
    if !s.chars().any(is_unsafe) {
        return Cow::Borrowed(s);
    }
    Cow::Owned(s.chars().map(replacement).collect())
}

/// [`clean`], keeping line feeds: for text laid out in lines (a table).
pub fn clean_lines(s: &str) -> Cow<'_, str> {
    if !s.chars().any(|c| c != '\n' && is_unsafe(c)) {
        return Cow::Borrowed(s);
    }
    Cow::Owned(
        s.chars()
            .map(|c| if c == '\n' { c } else { replacement(c) })
            .collect(),
    )
}

/// [`clean`] into an owned string, for fields read from outside.
pub fn cleaned(s: &str) -> String {
    clean(s).into_owned()
}

fn replacement(c: char) -> char {
    if !is_unsafe(c) {
        c
    } else if c.is_whitespace() {
        ' '
    } else {
        '\u{fffd}'
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn escapes_and_overrides_are_replaced_and_plain_text_is_kept() {
        // OSC 52 (write the clipboard) and a screen clear, as a tenant's owner name.
        let osc = "web\u{1b}]52;c;ZWNobyBwd25lZA==\u{7}\u{1b}[2J";
        assert_eq!(
            clean(osc),
            "web\u{fffd}]52;c;ZWNobyBwd25lZA==\u{fffd}\u{fffd}[2J"
        );
        assert_eq!(clean("a\u{202e}gpj.exe"), "a\u{fffd}gpj.exe");
        assert_eq!(clean("a\u{9b}31m"), "a\u{fffd}31m", "C1 CSI");
        assert_eq!(clean("two\nlines\tand\u{2028}more"), "two lines and more");
        assert_eq!(clean_lines("two\nlines\u{1b}"), "two\nlines\u{fffd}");
        let plain = "Pod tenant/web-0 hat IP 10.244.4.251 — ünïcödé, 日本語";
        assert!(matches!(clean(plain), Cow::Borrowed(_)));
    }

    proptest! {
        #[test]
        fn nothing_unsafe_survives_any_text(s in any::<String>()) {
            let c = clean(&s);
            prop_assert!(!c.chars().any(is_unsafe), "{:?}", c);
            prop_assert_eq!(c.chars().count(), s.chars().count());
            let l = clean_lines(&s);
            prop_assert!(!l.chars().any(|c| c != '\n' && is_unsafe(c)), "{:?}", l);
        }
    }
}
