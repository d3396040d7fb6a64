//! Rust source text as tokens, as far as the module graph needs them: identifiers, string
//! literals (for `include_str!` and the like) and punctuation (`::` as one token). Comments,
//! numbers, character literals and lifetimes are dropped.

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Tok {
    Ident(String),
    Str(String),
    /// `::`
    PathSep,
    Punct(char),
}

/// The tokens of `text`. Never fails: text that is not Rust gives tokens that resolve to
/// nothing.
pub fn tokens(text: &str) -> Vec<Tok> {
    lex(text).into_iter().map(|(t, _)| t).collect()
}

/// The tokens of `text`, each with the 1-based line it starts on.
pub fn tokens_with_lines(text: &str) -> Vec<(Tok, usize)> {
    let b = text.as_bytes();
    let (mut line, mut at) = (1, 0);
    lex(text)
        .into_iter()
        .map(|(t, pos)| {
            line += b[at..pos].iter().filter(|&&c| c == b'\n').count();
            at = pos;
            (t, line)
        })
        .collect()
}

/// The tokens of `text` with the byte offset each starts at.
fn lex(text: &str) -> Vec<(Tok, usize)> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c.is_ascii_whitespace() {
            i += 1;
        } else if c == b'/' && b.get(i + 1) == Some(&b'/') {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if c == b'/' && b.get(i + 1) == Some(&b'*') {
            i = block_comment_end(b, i);
        } else if c == b'"' {
            let (s, end) = string(b, i + 1);
            out.push((Tok::Str(s), i));
            i = end;
        } else if (c == b'r' || c == b'b') && raw_or_byte_string(b, i).is_some() {
            let (s, end) = raw_or_byte_string(b, i).expect("checked");
            out.push((Tok::Str(s), i));
            i = end;
        } else if c == b'\'' {
            i = quote_end(b, i);
        } else if c == b'_' || c.is_ascii_alphabetic() || c >= 0x80 {
            let start = i;
            while i < b.len() && (b[i] == b'_' || b[i].is_ascii_alphanumeric() || b[i] >= 0x80) {
                i += 1;
            }
            let mut word = &text[start..i];
            // Raw identifiers: `r#type`.
            if word == "r" && b.get(i) == Some(&b'#') {
                let s = i + 1;
                let mut e = s;
                while e < b.len() && (b[e] == b'_' || b[e].is_ascii_alphanumeric()) {
                    e += 1;
                }
                if e > s {
                    word = &text[s..e];
                    i = e;
                }
            }
            out.push((Tok::Ident(word.to_string()), start));
        } else if c.is_ascii_digit() {
            while i < b.len() && (b[i] == b'_' || b[i] == b'.' || b[i].is_ascii_alphanumeric()) {
                // `1..n`: a range, not a number's point.
                if b[i] == b'.' && b.get(i + 1) == Some(&b'.') {
                    break;
                }
                i += 1;
            }
        } else if c == b':' && b.get(i + 1) == Some(&b':') {
            out.push((Tok::PathSep, i));
            i += 2;
        } else {
            // One character of punctuation (a multi-byte character is skipped whole).
            let ch = text[i..].chars().next().unwrap_or(' ');
            out.push((Tok::Punct(ch), i));
            i += ch.len_utf8();
        }
    }
    out
}

fn block_comment_end(b: &[u8], mut i: usize) -> usize {
    let mut depth = 0usize;
    while i < b.len() {
        if b[i] == b'/' && b.get(i + 1) == Some(&b'*') {
            depth += 1;
            i += 2;
        } else if b[i] == b'*' && b.get(i + 1) == Some(&b'/') {
            depth -= 1;
            i += 2;
            if depth == 0 {
                return i;
            }
        } else {
            i += 1;
        }
    }
    i
}

/// A string's contents from just after its opening quote; returns (contents, index after the
/// closing quote). Escapes are kept as written but for `\"` and `\\`.
fn string(b: &[u8], mut i: usize) -> (String, usize) {
    let mut s = Vec::new();
    while i < b.len() {
        match b[i] {
            b'\\' if i + 1 < b.len() => {
                if b[i + 1] != b'"' && b[i + 1] != b'\\' {
                    s.push(b'\\');
                }
                s.push(b[i + 1]);
                i += 2;
            }
            b'"' => return (String::from_utf8_lossy(&s).into_owned(), i + 1),
            c => {
                s.push(c);
                i += 1;
            }
        }
    }
    (String::from_utf8_lossy(&s).into_owned(), i)
}

/// `r"…"`, `r#"…"#`, `b"…"`, `br#"…"#` starting at `i`, if one starts there.
fn raw_or_byte_string(b: &[u8], i: usize) -> Option<(String, usize)> {
    // Only at the start of a word.
    if i > 0 && (b[i - 1] == b'_' || b[i - 1].is_ascii_alphanumeric()) {
        return None;
    }
    let mut j = i;
    if b[j] == b'b' {
        j += 1;
    }
    let raw = b.get(j) == Some(&b'r');
    if raw {
        j += 1;
    }
    if !raw {
        return (b.get(j) == Some(&b'"') && j > i).then(|| string(b, j + 1));
    }
    let hashes = b[j..].iter().take_while(|&&c| c == b'#').count();
    j += hashes;
    if b.get(j) != Some(&b'"') {
        return None;
    }
    let start = j + 1;
    let mut k = start;
    while k < b.len() {
        if b[k] == b'"'
            && b[k + 1..]
                .iter()
                .take(hashes)
                .filter(|&&c| c == b'#')
                .count()
                == hashes
        {
            let s = String::from_utf8_lossy(&b[start..k]).into_owned();
            return Some((s, k + 1 + hashes));
        }
        k += 1;
    }
    Some((String::from_utf8_lossy(&b[start..]).into_owned(), b.len()))
}

/// The end of a character literal or a lifetime starting at `i` (the quote).
fn quote_end(b: &[u8], i: usize) -> usize {
    match b.get(i + 1) {
        Some(b'\\') => {
            // An escaped character: up to the closing quote.
            let mut j = i + 2;
            while j < b.len() && b[j] != b'\'' {
                j += 1;
            }
            j + 1
        }
        Some(_) => {
            // `'x'` (one character, possibly multi-byte) or a lifetime `'a`.
            let ch_len = std::str::from_utf8(&b[i + 1..(i + 5).min(b.len())])
                .ok()
                .or_else(|| {
                    (1..4)
                        .rev()
                        .find_map(|n| std::str::from_utf8(&b[i + 1..(i + 1 + n).min(b.len())]).ok())
                })
                .and_then(|s| s.chars().next())
                .map_or(1, char::len_utf8);
            if b.get(i + 1 + ch_len) == Some(&b'\'') {
                i + 2 + ch_len
            } else {
                let mut j = i + 1;
                while j < b.len() && (b[j] == b'_' || b[j].is_ascii_alphanumeric()) {
                    j += 1;
                }
                j
            }
        }
        None => i + 1,
    }
}
