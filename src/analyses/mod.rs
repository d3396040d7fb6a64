//! Analyses: one module per analysis, and the table of the built-in ones with their typed
//! parameters.
pub mod communication;
pub mod compilation;
pub mod external;
pub mod stragglers;
pub mod summary;

use serde::de::DeserializeOwned;

/// A built-in analysis as pipelines and command lines name it.
pub struct Builtin {
    pub name: &'static str,
    /// Checks a parameter table against the analysis's parameter type (unknown keys and
    /// ill-typed values are refused).
    check: fn(&serde_json::Value) -> Result<(), String>,
}

fn check<P: DeserializeOwned>(v: &serde_json::Value) -> Result<(), String> {
    serde_json::from_value::<P>(v.clone())
        .map(|_| ())
        .map_err(|e| e.to_string())
}

/// The parameters of an analysis that takes none.
#[derive(serde::Deserialize, Debug, Default)]
#[serde(deny_unknown_fields)]
pub struct NoParams {}

pub const BUILTIN: [Builtin; 4] = [
    Builtin {
        name: "summary",
        check: check::<NoParams>,
    },
    Builtin {
        name: "communication",
        check: check::<NoParams>,
    },
    Builtin {
        name: "compilation",
        check: check::<compilation::Params>,
    },
    Builtin {
        name: "stragglers",
        check: check::<NoParams>,
    },
];

pub fn builtin(name: &str) -> Option<&'static Builtin> {
    BUILTIN.iter().find(|b| b.name == name)
}

/// The names of the built-in analyses, for messages.
pub fn builtin_names() -> String {
    BUILTIN
        .iter()
        .map(|b| b.name)
        .collect::<Vec<_>>()
        .join(", ")
}

impl Builtin {
    /// Check `params` (a JSON object); the error says which key is wrong and why.
    pub fn check_params(&self, params: &serde_json::Value) -> Result<(), String> {
        (self.check)(params)
    }
}

/// A parameter given on the command line as `KEY=VALUE`: `true`/`false`, a number, or text.
pub fn parse_param(arg: &str) -> Option<(String, serde_json::Value)> {
    let (k, v) = arg.split_once('=')?;
    let k = k.trim();
    if k.is_empty() {
        return None;
    }
    let v = v.trim();
    let value = match v {
        "true" => serde_json::Value::Bool(true),
        "false" => serde_json::Value::Bool(false),
        _ => match v.parse::<i64>() {
            Ok(n) => n.into(),
            Err(_) => match v.parse::<f64>() {
                Ok(x) if x.is_finite() => x.into(),
                _ => serde_json::Value::String(v.to_string()),
            },
        },
    };
    Some((k.to_string(), value))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameters_are_typed() {
        let c = builtin("compilation").unwrap();
        assert!(c.check_params(&serde_json::json!({"detail": true})).is_ok());
        assert!(c.check_params(&serde_json::json!({})).is_ok());
        let e = c
            .check_params(&serde_json::json!({"detial": true}))
            .unwrap_err();
        assert!(e.contains("detial"), "{e}");
        let e = c
            .check_params(&serde_json::json!({"detail": "yes"}))
            .unwrap_err();
        assert!(e.contains("invalid type"), "{e}");
        let s = builtin("summary").unwrap();
        assert!(s.check_params(&serde_json::json!({"x": 1})).is_err());
        assert!(builtin("nope").is_none());
        assert_eq!(
            parse_param("detail=true"),
            Some(("detail".into(), true.into()))
        );
        assert_eq!(parse_param("n=3"), Some(("n".into(), 3.into())));
        assert_eq!(parse_param("s=abc"), Some(("s".into(), "abc".into())));
        assert_eq!(parse_param("--flag"), None);
    }
}
