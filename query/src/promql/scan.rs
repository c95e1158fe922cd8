//! A reader of the answer shape Prometheus (and the engines imitating it) writes: keys in any
//! order, whitespace anywhere, but strings without escapes, no control or non-ASCII byte in
//! them, no unknown key and no key twice. Anything else gives up (`None`), and the caller reads
//! the body again with serde, which decides. At fleet scale (200,000 series, 45 MB) serde's
//! token-by-token visitors were most of a tick; this finds each string's end eight bytes at a
//! time and parses the numbers of the common form directly.

use std::borrow::Cow;

use super::{parse_value, Points, SeriesLabels};

/// What the envelope holds besides the series.
pub(super) struct Envelope<'a> {
    pub status: &'a str,
    pub result_type: Option<&'a str>,
    pub warnings: Vec<String>,
    pub is_partial: bool,
}

/// Reads `body`, handing each series to `each`; `None` when the body is not of the shape read
/// here (the series handed over until then are read again by the caller).
pub(super) fn answer<'a>(
    body: &'a [u8],
    each: &mut dyn FnMut(SeriesLabels<'a>, Points),
) -> Option<Envelope<'a>> {
    let mut r = Reader { body, at: 0 };
    let mut status = None;
    let mut data: Option<Option<&str>> = None;
    let mut warnings = None;
    let mut is_partial = None;
    r.object(|r, key| match key {
        b"status" if status.is_none() => {
            status = Some(r.string()?);
            Some(())
        }
        b"data" if data.is_none() => {
            data = Some(if r.literal(b"null") {
                None
            } else {
                Some(r.data(each)?)
            });
            Some(())
        }
        b"warnings" if warnings.is_none() => {
            let mut list = Vec::new();
            r.array(|r| {
                list.push(r.string()?.to_string());
                Some(())
            })?;
            warnings = Some(list);
            Some(())
        }
        b"isPartial" if is_partial.is_none() => {
            is_partial = Some(if r.literal(b"true") {
                true
            } else if r.literal(b"false") {
                false
            } else {
                return None;
            });
            Some(())
        }
        _ => None,
    })?;
    r.ws();
    if r.at != body.len() {
        return None;
    }
    Some(Envelope {
        status: status?,
        result_type: data.flatten(),
        warnings: warnings.unwrap_or_default(),
        is_partial: is_partial.unwrap_or_default(),
    })
}

/// Bytes [`Reader::string_bytes`] returned as text. `str::from_utf8` on them again was a fifth of
/// reading an answer.
fn ascii(bytes: &[u8]) -> &str {
    debug_assert!(bytes.is_ascii());
    // SAFETY: `string_bytes` returns only bytes below 0x80 (it stops at any other), which are
    // UTF-8.
    unsafe { std::str::from_utf8_unchecked(bytes) }
}

struct Reader<'a> {
    body: &'a [u8],
    at: usize,
}

/// Bytes of a word equal to `b`, as the high bit of each byte.
fn bytes_equal(word: u64, b: u8) -> u64 {
    let x = word ^ (u64::from(b) * 0x0101_0101_0101_0101);
    x.wrapping_sub(0x0101_0101_0101_0101) & !x & 0x8080_8080_8080_8080
}

impl<'a> Reader<'a> {
    fn ws(&mut self) {
        while let Some(b' ' | b'\n' | b'\r' | b'\t') = self.body.get(self.at) {
            self.at += 1;
        }
    }

    /// The next byte after whitespace, consumed when it is `b`.
    fn eat(&mut self, b: u8) -> bool {
        self.ws();
        if self.body.get(self.at) == Some(&b) {
            self.at += 1;
            true
        } else {
            false
        }
    }

    fn literal(&mut self, text: &[u8]) -> bool {
        self.ws();
        if self.body[self.at..].starts_with(text) {
            self.at += text.len();
            true
        } else {
            false
        }
    }

    /// A string's bytes: printable ASCII without escapes (a `"`, `\`, control or non-ASCII byte
    /// ends the scan; only `"` ends the string here).
    fn string_bytes(&mut self) -> Option<&'a [u8]> {
        if !self.eat(b'"') {
            return None;
        }
        let start = self.at;
        let mut i = start;
        while let Some(chunk) = self.body.get(i..i + 8) {
            let word = u64::from_le_bytes(chunk.try_into().expect("8 bytes"));
            // Control bytes (< 0x20) and non-ASCII bytes (>= 0x80), quotes and backslashes.
            let special = (word.wrapping_sub(0x2020_2020_2020_2020) & !word
                | word
                | bytes_equal(word, b'"')
                | bytes_equal(word, b'\\'))
                & 0x8080_8080_8080_8080;
            if special != 0 {
                i += (special.trailing_zeros() / 8) as usize;
                break;
            }
            i += 8;
        }
        while let Some(&b) = self.body.get(i) {
            if b == b'"' {
                self.at = i + 1;
                return Some(&self.body[start..i]);
            }
            if !(0x20..0x80).contains(&b) || b == b'\\' {
                return None;
            }
            i += 1;
        }
        None
    }

    fn string(&mut self) -> Option<&'a str> {
        self.string_bytes().map(ascii)
    }

    /// `{ "key": value, ... }`, `member` reading each value.
    fn object(&mut self, mut member: impl FnMut(&mut Self, &'a [u8]) -> Option<()>) -> Option<()> {
        if !self.eat(b'{') {
            return None;
        }
        if self.eat(b'}') {
            return Some(());
        }
        loop {
            let key = self.string_bytes()?;
            if !self.eat(b':') {
                return None;
            }
            member(self, key)?;
            if self.eat(b'}') {
                return Some(());
            }
            if !self.eat(b',') {
                return None;
            }
        }
    }

    /// `[ value, ... ]`, `element` reading each.
    fn array(&mut self, mut element: impl FnMut(&mut Self) -> Option<()>) -> Option<()> {
        if !self.eat(b'[') {
            return None;
        }
        if self.eat(b']') {
            return Some(());
        }
        loop {
            element(self)?;
            if self.eat(b']') {
                return Some(());
            }
            if !self.eat(b',') {
                return None;
            }
        }
    }

    /// `data`: its `resultType`, the series of `result` handed to `each`.
    fn data(&mut self, each: &mut dyn FnMut(SeriesLabels<'a>, Points)) -> Option<&'a str> {
        let mut result_type = None;
        let mut result = false;
        self.object(|r, key| match key {
            b"resultType" if result_type.is_none() => {
                result_type = Some(r.string()?);
                Some(())
            }
            b"result" if !result => {
                result = true;
                r.array(|r| r.series(each))
            }
            _ => None,
        })?;
        result.then_some(())?;
        result_type
    }

    fn series(&mut self, each: &mut dyn FnMut(SeriesLabels<'a>, Points)) -> Option<()> {
        let mut labels = None;
        let mut points = None;
        self.object(|r, key| match key {
            b"metric" if labels.is_none() => {
                let mut list = SeriesLabels::new();
                r.object(|r, name| {
                    let value = r.string()?;
                    list.push((Cow::Borrowed(ascii(name)), Cow::Borrowed(value)));
                    Some(())
                })?;
                labels = Some(list);
                Some(())
            }
            b"values" if points.is_none() => {
                let mut list = Points::new();
                r.array(|r| {
                    list.push(r.point()?);
                    Some(())
                })?;
                points = Some(list);
                Some(())
            }
            b"value" if points.is_none() => {
                points = Some(Points::from_elem(r.point()?, 1));
                Some(())
            }
            _ => None,
        })?;
        each(labels.unwrap_or_default(), points.unwrap_or_default());
        Some(())
    }

    /// `[seconds, "value"]` as (milliseconds, value).
    fn point(&mut self) -> Option<(i64, f64)> {
        if !self.eat(b'[') {
            return None;
        }
        let t = self.milliseconds()?;
        if !self.eat(b',') {
            return None;
        }
        let v = parse_value(self.string()?).ok()?;
        if !self.eat(b']') {
            return None;
        }
        Some((t, v))
    }

    /// A JSON number of seconds as milliseconds, rounded as the serde reader does
    /// (`(seconds * 1000.0).round()`). Up to three decimals and 11 digits before them (all
    /// Prometheus writes, until the year 5138), the integer arithmetic here gives the same result:
    /// serde's one division by a power of ten and the product are each off by at most one part in
    /// 2^53, a twentieth of a millisecond at 10^14 ms. Other forms give up.
    fn milliseconds(&mut self) -> Option<i64> {
        self.ws();
        let b = self.body;
        let mut i = self.at;
        let negative = b.get(i) == Some(&b'-');
        if negative {
            i += 1;
        }
        let digits = |i: &mut usize| {
            let (start, mut n) = (*i, 0i64);
            while let Some(d @ b'0'..=b'9') = b.get(*i) {
                n = n * 10 + i64::from(d - b'0');
                *i += 1;
            }
            (n, *i - start)
        };
        let (whole, whole_len) = digits(&mut i);
        // JSON: no leading zero before other digits.
        if whole_len == 0 || (whole_len > 1 && b[i - whole_len] == b'0') {
            return None;
        }
        let (mut fraction, mut decimals) = (0, 0);
        if b.get(i) == Some(&b'.') {
            i += 1;
            (fraction, decimals) = digits(&mut i);
            if decimals == 0 || decimals > 3 {
                return None;
            }
        }
        if whole_len > 11 || matches!(b.get(i), Some(b'e' | b'E')) {
            return None;
        }
        self.at = i;
        let ms = whole * 1000 + fraction * 10i64.pow(3 - decimals as u32);
        Some(if negative { -ms } else { ms })
    }
}
