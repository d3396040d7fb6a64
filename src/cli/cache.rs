//! `cache`: the arguments of `cache stats|push|gc|keygen` turned into the command's request
//! ([`crate::commands::cache`]), and what it found printed.

use super::args::CacheCommand;
use crate::commands::cache::{self, ByKind};
use crate::table::{Table, human_bytes};
use anyhow::{Result, bail};

/// `cache stats`, `push`, `keygen` and `gc`.
pub(super) fn cache(c: CacheCommand) -> Result<()> {
    match c {
        CacheCommand::Stats(args) => {
            let s = cache::stats(&args.path(), args.url.open()?)?;
            println!(
                "cache {}: {} entries, {}",
                s.dir.display(),
                s.local.entries,
                human_bytes(s.local.bytes)
            );
            print!("{}", kinds_table(&s.local.by_kind));
            for (url, c) in &s.recorded {
                println!(
                    "remote {url}: {} hits, {} misses, {} uploads, {} damaged objects replaced, {} inputs keyed by their claims (all runs of this cache)",
                    c.hits, c.misses, c.uploads, c.damaged, c.claimed
                );
            }
            if let Some((url, by_kind)) = &s.remote {
                let (n, b) = by_kind
                    .values()
                    .fold((0, 0), |(n, b), (k, s)| (n + k, b + s));
                println!("remote cache {url}: {n} entries, {}", human_bytes(b));
                print!("{}", kinds_table(by_kind));
            }
        }
        CacheCommand::Push(args) => {
            let p = cache::push(&args.path(), args.url.open()?)?;
            println!(
                "{}: {} entries, {} uploaded to {} (the others were there)",
                args.path().display(),
                p.entries,
                p.counts.uploads,
                p.url
            );
        }
        CacheCommand::Keygen { name, output } => {
            let public = cache::keygen(&name, &output)?;
            println!("{public}");
            eprintln!(
                "secret key written to {} (for the machines that write the shared cache: \
                 ${}); the public key above is for those that read it (${})",
                output.display(),
                crate::store::remote::SIGNING_KEY_VAR,
                crate::store::remote::TRUSTED_KEYS_VAR
            );
        }
        CacheCommand::Gc {
            cache: dir,
            max_size,
            max_age,
        } => {
            let max_bytes = max_size.as_deref().map(parse_size).transpose()?;
            let max_age = max_age.as_deref().map(parse_age).transpose()?;
            let dir = dir.path();
            let s = cache::gc(&dir, max_bytes, max_age)?;
            println!(
                "removed {} entries ({}); {} entries ({}) remain in {}",
                s.removed_entries,
                human_bytes(s.removed_bytes),
                s.entries,
                human_bytes(s.bytes),
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

/// Entries and size by node kind, as a table.
fn kinds_table(by_kind: &ByKind) -> String {
    let mut t = Table::new(&["node kind", "entries", "size"]);
    t.align_right(&[1, 2]);
    for (k, (n, b)) in by_kind {
        t.row(vec![k.clone(), n.to_string(), human_bytes(*b)]);
    }
    t.render()
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
