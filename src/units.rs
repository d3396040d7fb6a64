//! Numbers for people: three significant figures and a unit chosen per value (µs / ms / s,
//! B / KiB / MiB / GiB), as the HTML report and the terminal tables print them.

/// `x` with three significant figures, without an exponent: `1.23`, `12.3`, `123`, `12300`,
/// `0.00123`.
pub fn sig3(x: f64) -> String {
    if !x.is_finite() {
        return format!("{x}");
    }
    if x == 0.0 {
        return "0".to_string();
    }
    let mag = x.abs().log10().floor() as i32;
    // Rounding may carry into the next magnitude (9.996 -> 10.0): decide on the rounded value.
    let decimals = (2 - mag).max(0) as usize;
    let rounded: f64 = format!("{x:.decimals$}").parse().unwrap_or(x);
    let mag = if rounded == 0.0 {
        mag
    } else {
        rounded.abs().log10().floor() as i32
    };
    if mag >= 2 {
        let scale = 10f64.powi(mag - 2);
        format!("{:.0}", (x / scale).round() * scale)
    } else {
        format!("{x:.*}", (2 - mag) as usize)
    }
}

/// A duration given in nanoseconds: `850 ns`, `1.23 µs`, `45.6 ms`, `2.50 s`.
pub fn duration_ns(ns: f64) -> String {
    let a = ns.abs();
    let (v, unit) = if a >= 999.5e6 {
        (ns / 1e9, "s")
    } else if a >= 999.5e3 {
        (ns / 1e6, "ms")
    } else if a >= 999.5 {
        (ns / 1e3, "µs")
    } else {
        (ns, "ns")
    };
    format!("{} {unit}", sig3(v))
}

/// A duration given in milliseconds (see [`duration_ns`]).
pub fn duration_ms(ms: f64) -> String {
    duration_ns(ms * 1e6)
}

/// A change of duration given in milliseconds, signed: `+13.3 ms`, `−412 µs`.
pub fn signed_ms(ms: f64) -> String {
    if ms < 0.0 {
        format!("−{}", duration_ms(-ms))
    } else {
        format!("+{}", duration_ms(ms))
    }
}

/// A byte count: `512 B`, `1.50 MiB`, `15.3 GiB`.
pub fn bytes(b: f64) -> String {
    let units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut x = b;
    let mut u = 0;
    while x.abs() >= 1023.5 && u + 1 < units.len() {
        x /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{} B", x.round())
    } else {
        format!("{} {}", sig3(x), units[u])
    }
}

/// A mean and its standard deviation in milliseconds, each with its unit: `127 ms ± 660 µs`
/// (the mean alone when the deviation is unknown or zero).
pub fn ms_pm(mean: f64, std: Option<f64>) -> String {
    match std {
        Some(s) if s > 0.0 && s.is_finite() => {
            format!("{} ± {}", duration_ms(mean), duration_ms(s))
        }
        _ => duration_ms(mean),
    }
}

/// A rate given in GB/s, with its standard error when known, in the unit the rate needs:
/// `54.1 ± 0.536 GB/s`, `353 ± 47.2 kB/s`.
pub fn rate_gbps(gbps: f64, err: Option<f64>) -> String {
    let a = gbps.abs();
    let (scale, unit) = if a >= 0.9995 || a == 0.0 {
        (1.0, "GB/s")
    } else if a >= 0.9995e-3 {
        (1e3, "MB/s")
    } else {
        (1e6, "kB/s")
    };
    match err {
        Some(e) if e.is_finite() => format!("{} ± {} {unit}", sig3(gbps * scale), sig3(e * scale)),
        _ => format!("{} {unit}", sig3(gbps * scale)),
    }
}

/// A percentage (given in percent) for a table column: three significant figures, at most
/// seven characters (`84.0`, `0.232`, `<0.001`).
pub fn pct(p: f64) -> String {
    if p != 0.0 && p.abs() < 0.001 {
        "<0.001".to_string()
    } else {
        sig3(p)
    }
}

/// `text` cut to `n` characters, its end kept (`…` marks the cut).
pub fn fit(text: &str, n: usize) -> String {
    let count = text.chars().count();
    if count <= n {
        return text.to_string();
    }
    let cut: String = text.chars().take(n.saturating_sub(1)).collect();
    format!("{cut}…")
}

/// `text` wrapped at `width` columns (words kept whole where they fit), later lines indented
/// by `indent` spaces.
pub fn wrap(text: &str, width: usize, indent: usize) -> String {
    let mut out = String::new();
    let mut line = String::new();
    for word in text.split(' ') {
        let room = if out.is_empty() {
            width
        } else {
            width - indent
        };
        if !line.is_empty() && line.chars().count() + 1 + word.chars().count() > room {
            if !out.is_empty() {
                out.push_str(&" ".repeat(indent));
            }
            out.push_str(&line);
            out.push('\n');
            line.clear();
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !out.is_empty() {
        out.push_str(&" ".repeat(indent));
    }
    out.push_str(&line);
    out
}

/// A relative change (a fraction) as a signed percentage, three significant figures:
/// `+1.23 %`, `−86.6 %`, `+1890 %`.
pub fn signed_percent(fraction: f64) -> String {
    let p = 100.0 * fraction;
    let sign = if p < 0.0 { "−" } else { "+" };
    format!("{sign}{} %", sig3(p.abs()))
}

/// A fraction as a percentage: `12.3 %`.
pub fn percent(fraction: f64) -> String {
    format!("{} %", sig3(fraction * 100.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn three_significant_figures() {
        assert_eq!(sig3(1.23456), "1.23");
        assert_eq!(sig3(12.3456), "12.3");
        assert_eq!(sig3(123.456), "123");
        assert_eq!(sig3(12345.6), "12300");
        assert_eq!(sig3(0.00123456), "0.00123");
        assert_eq!(sig3(-4.5678), "-4.57");
        assert_eq!(sig3(9.996), "10.0");
        assert_eq!(sig3(99.96), "100");
        assert_eq!(sig3(0.0), "0");
    }

    #[test]
    fn scaled_units() {
        assert_eq!(duration_ns(850.0), "850 ns");
        assert_eq!(duration_ns(1234.0), "1.23 µs");
        assert_eq!(duration_ns(999.9), "1.00 µs");
        assert_eq!(duration_ms(45.61), "45.6 ms");
        assert_eq!(duration_ms(2500.0), "2.50 s");
        assert_eq!(bytes(512.0), "512 B");
        assert_eq!(bytes(1.5 * 1024.0 * 1024.0), "1.50 MiB");
        assert_eq!(bytes(16384076800.0), "15.3 GiB");
        assert_eq!(percent(0.6657), "66.6 %");
        assert_eq!(ms_pm(126.51, Some(0.66)), "127 ms ± 660 µs");
        assert_eq!(ms_pm(0.002271, None), "2.27 µs");
        assert_eq!(rate_gbps(54.0943, Some(0.536376)), "54.1 ± 0.536 GB/s");
        assert_eq!(rate_gbps(0.000352573, Some(0.000047219)), "353 ± 47.2 kB/s");
        assert_eq!(rate_gbps(0.0162842, None), "16.3 MB/s");
        assert_eq!(pct(0.0000910), "<0.001");
        assert_eq!(pct(0.0837), "0.0837");
        assert_eq!(fit("pjit__wrapped_step_fn", 10), "pjit__wra…");
        assert_eq!(wrap("note: aaa bbb ccc", 10, 2), "note: aaa\n  bbb ccc");
    }
}
