//! Whole numbers in request bodies as JSON has them: one number type, so
//! `51.0` is the integer 51 (JSON Schema agrees, and so the OpenAPI
//! document's `integer` allows it). serde reads a float into an integer
//! field as a type error; these deserializers (`#[serde(deserialize_with =
//! …)]`) take a whole float up to 2^53 (every integer up to it is exact)
//! as the integer, and refuse a fraction or a value out of the field's
//! range as before, in serde's words.

use std::fmt;
use std::marker::PhantomData;

use serde::de::{self, Deserializer, Unexpected, Visitor};

/// 2^53: the largest float every integer below which is exact.
const EXACT: f64 = 9_007_199_254_740_992.0;

/// Reads an integer of type `T`, written as an integer or a whole float.
///
/// # Errors
/// A serde error for anything but a whole number in `T`'s range.
pub fn whole<'de, D: Deserializer<'de>, T: TryFrom<i128>>(d: D) -> Result<T, D::Error> {
    d.deserialize_any(Whole(PhantomData))
}

/// [`whole`] for an optional field (`null` is `None`).
///
/// # Errors
/// As [`whole`].
pub fn optional_whole<'de, D: Deserializer<'de>, T: TryFrom<i128>>(
    d: D,
) -> Result<Option<T>, D::Error> {
    d.deserialize_option(Optional(PhantomData))
}

struct Whole<T>(PhantomData<T>);

impl<T: TryFrom<i128>> Whole<T> {
    fn fit<E: de::Error>(n: i128, unexpected: Unexpected<'_>) -> Result<T, E> {
        T::try_from(n).map_err(|_| E::invalid_value(unexpected, &Whole::<T>(PhantomData)))
    }
}

impl<'de, T: TryFrom<i128>> Visitor<'de> for Whole<T> {
    type Value = T;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // As serde says it for a plain integer field: `expected u64`.
        f.write_str(std::any::type_name::<T>())
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<T, E> {
        Self::fit(v.into(), Unexpected::Signed(v))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<T, E> {
        Self::fit(v.into(), Unexpected::Unsigned(v))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<T, E> {
        if v.fract() == 0.0 && v.abs() <= EXACT {
            // Exact: a whole float of at most 2^53.
            Self::fit(v as i128, Unexpected::Float(v))
        } else {
            Err(E::invalid_type(Unexpected::Float(v), &self))
        }
    }
}

struct Optional<T>(PhantomData<T>);

impl<'de, T: TryFrom<i128>> Visitor<'de> for Optional<T> {
    type Value = Option<T>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "null or {}", std::any::type_name::<T>())
    }

    fn visit_none<E: de::Error>(self) -> Result<Option<T>, E> {
        Ok(None)
    }

    fn visit_unit<E: de::Error>(self) -> Result<Option<T>, E> {
        Ok(None)
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Option<T>, D::Error> {
        whole(d).map(Some)
    }
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;

    #[derive(Debug, PartialEq, Deserialize)]
    struct Counts {
        #[serde(deserialize_with = "super::whole")]
        size: u64,
        #[serde(default, deserialize_with = "super::optional_whole")]
        limit: Option<u32>,
        #[serde(default, deserialize_with = "super::optional_whole")]
        seconds: Option<i64>,
    }

    fn read(json: &str) -> Result<Counts, String> {
        serde_json::from_str(json).map_err(|e| e.to_string())
    }

    #[test]
    fn whole_floats_are_integers() {
        assert_eq!(
            read(r#"{"size": 51.0, "limit": 7.0, "seconds": -3.0}"#),
            Ok(Counts {
                size: 51,
                limit: Some(7),
                seconds: Some(-3)
            })
        );
        assert_eq!(
            read(r#"{"size": 18446744073709551615, "limit": null}"#),
            Ok(Counts {
                size: u64::MAX,
                limit: None,
                seconds: None
            })
        );
        assert_eq!(
            read(r#"{"size": 9007199254740992.0}"#).map(|c| c.size),
            Ok(1 << 53)
        );
    }

    #[test]
    fn fractions_and_values_out_of_range_are_refused() {
        for json in [
            r#"{"size": 1.5}"#,
            r#"{"size": -1}"#,
            r#"{"size": -1.0}"#,
            r#"{"size": 1e300}"#,
            r#"{"size": 18014398509481984.0}"#,
            r#"{"size": "1"}"#,
            r#"{"size": 1, "limit": 4294967296}"#,
            r#"{"size": 1, "limit": 0.5}"#,
            r#"{"size": 1, "seconds": true}"#,
        ] {
            assert!(read(json).is_err(), "{json}");
        }
        let e = read(r#"{"size": 1, "limit": -2}"#).unwrap_err();
        assert!(e.contains("-2") && e.contains("u32"), "{e}");
    }
}
