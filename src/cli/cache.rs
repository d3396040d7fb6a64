//! `cache`: the on-disk cache's size by node kind, trimming it, and filling the shared one.

use super::args::CacheCommand;
use anyhow::{Context, Result, bail};

/// `cache stats` and `cache gc`.
pub(super) fn cache(c: CacheCommand) -> Result<()> {
    match c {
        CacheCommand::Stats(args) => {
            let dir = args.path();
            let store = crate::engine::Store::open(&dir)?;
            let s = store.stats();
            println!(
                "cache {}: {} entries, {}",
                dir.display(),
                s.entries,
                crate::table::human_bytes(s.bytes)
            );
            let mut t = crate::table::Table::new(&["node kind", "entries", "size"]);
            t.align_right(&[1, 2]);
            for (k, (n, b)) in &s.by_kind {
                t.row(vec![
                    k.clone(),
                    n.to_string(),
                    crate::table::human_bytes(*b),
                ]);
            }
            print!("{}", t.render());
            remote_stats(&dir, &args)?;
        }
        CacheCommand::Push(args) => {
            let dir = args.path();
            let Some(remote) = args.url.open()? else {
                bail!("cache push needs the shared cache: give --cache-url URL");
            };
            let store = crate::engine::Store::open(&dir)?.with_remote(Some(remote));
            let (entries, counts) = store.push();
            println!(
                "{}: {entries} entries, {} uploaded to {} (the others were there)",
                dir.display(),
                counts.uploads,
                store.remote().expect("given").url()
            );
        }
        CacheCommand::Keygen { name, output } => {
            let (secret, public) = crate::engine::signing::keygen(&name)?;
            super::commands::write_secret(&output, secret.as_bytes())?;
            println!("{public}");
            eprintln!(
                "secret key written to {} (for the machines that write the shared cache: \
                 ${}); the public key above is for those that read it (${})",
                output.display(),
                crate::engine::remote::SIGNING_KEY_VAR,
                crate::engine::remote::TRUSTED_KEYS_VAR
            );
        }
        CacheCommand::Gc {
            cache,
            max_size,
            max_age,
        } => {
            if max_size.is_none() && max_age.is_none() {
                bail!("cache gc needs --max-size and/or --max-age");
            }
            let dir = cache.path();
            let store = crate::engine::Store::open(&dir)?;
            let max_bytes = max_size.as_deref().map(parse_size).transpose()?;
            let max_age = max_age.as_deref().map(parse_age).transpose()?;
            let s = store.gc(max_bytes, max_age);
            println!(
                "removed {} entries ({}); {} entries ({}) remain in {}",
                s.removed_entries,
                crate::table::human_bytes(s.removed_bytes),
                s.entries,
                crate::table::human_bytes(s.bytes),
                dir.display()
            );
            if s.removed_leftovers > 0 {
                println!(
                    "removed {} temporary files or folders of killed runs",
                    s.removed_leftovers
                );
            }
        }
    }
    Ok(())
}

/// What the remote tiers did for this local cache, summed over its runs; with `--cache-url`,
/// also what that remote cache holds.
fn remote_stats(dir: &std::path::Path, args: &super::args::CacheDir) -> Result<()> {
    for (url, c) in crate::engine::remote::recorded_counts(dir) {
        println!(
            "remote {url}: {} hits, {} misses, {} uploads, {} damaged objects replaced, {} inputs keyed by their claims (all runs of this cache)",
            c.hits, c.misses, c.uploads, c.damaged, c.claimed
        );
    }
    let Some(remote) = args.url.open()? else {
        return Ok(());
    };
    let by_kind = remote
        .list("objects")
        .with_context(|| format!("remote cache {}: cannot list", remote.url()))?;
    let (n, b) = by_kind
        .values()
        .fold((0, 0), |(n, b), (k, s)| (n + k, b + s));
    println!(
        "remote cache {}: {n} entries, {}",
        remote.url(),
        crate::table::human_bytes(b)
    );
    let mut t = crate::table::Table::new(&["node kind", "entries", "size"]);
    t.align_right(&[1, 2]);
    for (k, (n, b)) in &by_kind {
        t.row(vec![
            k.clone(),
            n.to_string(),
            crate::table::human_bytes(*b),
        ]);
    }
    print!("{}", t.render());
    Ok(())
}

/// `500M`, `2G`, `1024` (bytes), `10K`.
pub fn parse_size(s: &str) -> Result<u64> {
    crate::formats::limits::parse_size(s)
        .ok_or_else(|| anyhow::anyhow!("bad size {s:?} (e.g. 500M, 2G)"))
}

/// `30d`, `12h`, `45m`, `90s`.
pub fn parse_age(s: &str) -> Result<std::time::Duration> {
    let s = s.trim();
    let (num, mult) = match s.chars().last() {
        Some('d') => (&s[..s.len() - 1], 86400.0),
        Some('h') => (&s[..s.len() - 1], 3600.0),
        Some('m') => (&s[..s.len() - 1], 60.0),
        Some('s') => (&s[..s.len() - 1], 1.0),
        _ => bail!("bad age {s:?} (e.g. 30d, 12h, 45m)"),
    };
    let n: f64 = num
        .parse()
        .map_err(|_| anyhow::anyhow!("bad age {s:?} (e.g. 30d, 12h, 45m)"))?;
    Ok(std::time::Duration::from_secs_f64(n * mult))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_ages() {
        assert_eq!(parse_size("2G").unwrap(), 2 << 30);
        assert_eq!(parse_size("10").unwrap(), 10);
        assert!(parse_size("x").is_err());
        assert_eq!(parse_age("2h").unwrap().as_secs(), 7200);
        assert!(parse_age("2").is_err());
    }
}
