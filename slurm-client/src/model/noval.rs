//! Slurm's "no value" numbers: `{set, infinite, number}` objects, where unset, infinite and
//! a real number must stay apart (a time limit of `Infinite` is not a missing time limit).

use serde::{Serialize, Serializer};

/// A number that Slurm may leave unset or set to infinite.
///
/// Serialized as `null` (unset), the string `"infinite"`, or the number itself.
///
/// ```
/// use slurm_client::Limit;
/// let limit: Limit<u32> = Limit::Value(60);
/// assert_eq!(limit.value(), Some(60));
/// assert!(Limit::<u32>::Infinite.is_infinite());
/// assert_eq!(Limit::<u32>::Unset.value_or(5), 5);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Limit<T> {
    /// No value (`set: false`).
    #[default]
    Unset,
    /// Explicitly unlimited (`infinite: true`).
    Infinite,
    /// A value (`set: true`).
    Value(T),
}

impl<T> Limit<T> {
    /// The value, if there is one (not for `Unset` or `Infinite`).
    pub fn value(self) -> Option<T> {
        match self {
            Limit::Value(v) => Some(v),
            _ => None,
        }
    }

    /// The value, or `default` when unset or infinite.
    pub fn value_or(self, default: T) -> T {
        self.value().unwrap_or(default)
    }

    /// Whether this is `Unset`.
    pub fn is_unset(&self) -> bool {
        matches!(self, Limit::Unset)
    }

    /// Whether this is `Infinite`.
    pub fn is_infinite(&self) -> bool {
        matches!(self, Limit::Infinite)
    }

    /// Whether this holds a value.
    pub fn is_value(&self) -> bool {
        matches!(self, Limit::Value(_))
    }

    /// Transforms the value, keeping `Unset` and `Infinite`.
    pub fn map<U>(self, f: impl FnOnce(T) -> U) -> Limit<U> {
        match self {
            Limit::Unset => Limit::Unset,
            Limit::Infinite => Limit::Infinite,
            Limit::Value(v) => Limit::Value(f(v)),
        }
    }

    /// Borrows the value.
    pub fn as_ref(&self) -> Limit<&T> {
        match self {
            Limit::Unset => Limit::Unset,
            Limit::Infinite => Limit::Infinite,
            Limit::Value(v) => Limit::Value(v),
        }
    }

    /// Builds a limit from the three fields Slurm sends. `infinite` wins over `set`;
    /// a number without `set` counts as set.
    pub fn from_parts(set: Option<bool>, infinite: Option<bool>, number: Option<T>) -> Limit<T> {
        if infinite == Some(true) {
            return Limit::Infinite;
        }
        if set == Some(false) {
            return Limit::Unset;
        }
        number.map_or(Limit::Unset, Limit::Value)
    }
}

impl Limit<i64> {
    /// Narrows to another integer type; a number that does not fit becomes `Unset`
    /// (Slurm uses such numbers as "no value" markers).
    pub fn narrow<U: TryFrom<i64>>(self) -> Limit<U> {
        match self {
            Limit::Unset => Limit::Unset,
            Limit::Infinite => Limit::Infinite,
            Limit::Value(v) => U::try_from(v).map_or(Limit::Unset, Limit::Value),
        }
    }
}

impl<T> From<T> for Limit<T> {
    fn from(value: T) -> Self {
        Limit::Value(value)
    }
}

impl<T: Serialize> Serialize for Limit<T> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Limit::Unset => serializer.serialize_none(),
            Limit::Infinite => serializer.serialize_str("infinite"),
            Limit::Value(v) => v.serialize(serializer),
        }
    }
}

/// The wire form `{set, infinite, number}` of a limit, for request bodies.
#[derive(Serialize)]
pub(crate) struct Wire<T> {
    set: bool,
    infinite: bool,
    number: T,
}

impl<T: Default> From<Limit<T>> for Wire<T> {
    fn from(limit: Limit<T>) -> Wire<T> {
        match limit {
            Limit::Unset => Wire {
                set: false,
                infinite: false,
                number: T::default(),
            },
            Limit::Infinite => Wire {
                set: false,
                infinite: true,
                number: T::default(),
            },
            Limit::Value(number) => Wire {
                set: true,
                infinite: false,
                number,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_keep_the_three_cases_apart() {
        assert_eq!(
            Limit::from_parts(Some(true), Some(false), Some(5)),
            Limit::Value(5)
        );
        assert_eq!(
            Limit::from_parts(Some(false), Some(false), Some(0)),
            Limit::<i64>::Unset
        );
        assert_eq!(
            Limit::from_parts(Some(false), Some(true), Some(0)),
            Limit::<i64>::Infinite
        );
        assert_eq!(Limit::from_parts(None, None, Some(7)), Limit::Value(7));
        assert_eq!(Limit::<i64>::from_parts(None, None, None), Limit::Unset);
    }

    #[test]
    fn narrowing_keeps_u32_range() {
        assert_eq!(
            Limit::Value(4_294_967_293i64).narrow::<u32>(),
            Limit::Value(4_294_967_293u32)
        );
        assert_eq!(Limit::Value(-1i64).narrow::<u32>(), Limit::Unset);
        assert_eq!(Limit::<i64>::Infinite.narrow::<u32>(), Limit::Infinite);
    }

    #[test]
    fn serializes_as_null_infinite_or_number() {
        let json =
            serde_json::to_string(&[Limit::Unset, Limit::Infinite, Limit::Value(3u32)]).unwrap();
        assert_eq!(json, r#"[null,"infinite",3]"#);
        let wire = serde_json::to_string(&Wire::from(Limit::Value(3u32))).unwrap();
        assert_eq!(wire, r#"{"set":true,"infinite":false,"number":3}"#);
        let wire = serde_json::to_string(&Wire::from(Limit::<u32>::Infinite)).unwrap();
        assert_eq!(wire, r#"{"set":false,"infinite":true,"number":0}"#);
    }
}
