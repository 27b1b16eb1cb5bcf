//! The caches resource: `GET /v1/caches`, `GET /v1/caches/{name}` and
//! `PUT /v1/caches/{name}/sheaf_capacity`.
//!
//! Snapshots come from `sheafalloc_core::stats` (never allocating, taking
//! the engine's locks briefly); the JSON is built afterwards. A capacity
//! change is live: threads apply it at their next sheaf exchange, which the
//! `sheaf_capacity_in_use_min/max` fields let a client watch.

use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, PathRejection};
use axum::extract::Path;
use axum::Json;
use serde::{Deserialize, Serialize};
use sheafalloc_core::cache::max_sheaf_capacity;
use sheafalloc_core::size_class::NUM_CLASSES;
use sheafalloc_core::stats::{cache_stats, cache_stats_all, large_stats, CacheStats, LargeStats};
use sheafalloc_core::{
    release_sheaf_capacity, runtime, set_sheaf_capacity, CapacityOutOfRange, SizeClass, Tuning,
};

use crate::error::ApiError;

/// One cache as the API shows it: the name and every statistic of the
/// core's counter table (`sheafalloc_core::counters`), flattened, so a
/// counter added there appears here without a line of this crate.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CacheView {
    /// `size-<object size>`, e.g. `size-256`.
    pub name: String,
    /// The largest capacity `PUT .../sheaf_capacity` accepts for this cache
    /// (1024, or fewer for large objects: a sheaf holds at most
    /// `SHEAF_BYTES_MAX` bytes of objects).
    #[serde(default)]
    pub sheaf_capacity_max: u32,
    /// The snapshot (JSON: its fields at the top level).
    #[serde(flatten)]
    pub stats: CacheStats,
}

impl core::ops::Deref for CacheView {
    type Target = CacheStats;
    fn deref(&self) -> &CacheStats {
        &self.stats
    }
}

impl CacheView {
    /// The view of one snapshot.
    pub fn new(class: SizeClass, stats: &CacheStats) -> Self {
        Self {
            name: class.name().as_str().to_owned(),
            sheaf_capacity_max: max_sheaf_capacity(class),
            stats: *stats,
        }
    }
}

/// Direct mappings (objects above the largest size class): the core's
/// `LargeStats` as is.
pub type LargeView = LargeStats;

/// Threads with a thread cache.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThreadsView {
    /// Alive now.
    pub live: u64,
    /// Ever registered.
    pub ever: u64,
}

/// Body of `GET /v1/caches`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CachesView {
    /// Every cache, smallest object size first.
    pub caches: Vec<CacheView>,
    /// Direct mappings.
    pub large: LargeView,
    /// Threads.
    pub threads: ThreadsView,
}

/// Body of `PUT /v1/caches/{name}/sheaf_capacity`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CapacityRequest {
    /// The new capacity, `1..=sheaf_capacity_max` (pins the cache), or
    /// `"auto"` (hands it back to the auto-tuner).
    pub sheaf_capacity: CapacityValue,
}

/// A capacity as the API takes it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum CapacityValue {
    /// A number of objects.
    Number(serde_json::Number),
    /// A word: only `"auto"` means something.
    Word(String),
}

/// Answer to a capacity change.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CapacityChanged {
    /// The cache.
    pub name: String,
    /// The capacity now set (threads apply it at their next exchange).
    pub sheaf_capacity: u32,
    /// The capacity before the change.
    pub previous_sheaf_capacity: u32,
    /// How the capacity is chosen from now on: `pinned` after a number,
    /// `auto` (or `off`, with the tuner off) after `"auto"`.
    pub tuning: Tuning,
}

/// Snapshots every cache, smallest first, an aligned twin right after the
/// class of its size (one pass over the threads).
pub fn snapshot_all() -> Vec<(SizeClass, CacheStats)> {
    let mut all = Box::new([CacheStats::default(); NUM_CLASSES]);
    cache_stats_all(&mut all);
    let mut caches: Vec<(SizeClass, CacheStats)> = SizeClass::all()
        .zip(all.iter())
        .map(|(class, stats)| (class, *stats))
        .collect();
    caches.sort_by_key(|(class, _)| (class.object_size(), class.is_aligned_twin()));
    caches
}

/// `GET /v1/caches`.
pub(crate) async fn list() -> Json<CachesView> {
    let caches = snapshot_all()
        .iter()
        .map(|(class, stats)| CacheView::new(*class, stats))
        .collect();
    let (live, ever) = runtime::thread_counts();
    Json(CachesView {
        caches,
        large: large_stats(),
        threads: ThreadsView { live, ever },
    })
}

/// `GET /v1/caches/{name}`.
pub(crate) async fn show(
    name: Result<Path<String>, PathRejection>,
) -> Result<Json<CacheView>, ApiError> {
    let class = class_named(name)?;
    Ok(Json(CacheView::new(class, &cache_stats(class))))
}

/// `PUT /v1/caches/{name}/sheaf_capacity` with `{"sheaf_capacity": N}`.
pub(crate) async fn set_capacity(
    name: Result<Path<String>, PathRejection>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<CapacityChanged>, ApiError> {
    let class = class_named(name)?;
    let body = body.map_err(|rejection| {
        crate::rejection_to_error(rejection.status(), rejection.body_text())
    })?;
    let request = parse_capacity_request(&body)?;
    let previous = cache_stats(class).sheaf_capacity;
    match &request.sheaf_capacity {
        CapacityValue::Number(number) => {
            let capacity = capacity_value(class, number)?;
            set_sheaf_capacity(class, capacity)
                .map_err(|error| ApiError::Unprocessable(error.to_string()))?;
        }
        CapacityValue::Word(word) if word == "auto" => release_sheaf_capacity(class),
        CapacityValue::Word(word) => {
            return Err(ApiError::BadRequest(format!(
                "sheaf_capacity must be a whole number or \"auto\", got {word:?}"
            )))
        }
    }
    let now = cache_stats(class);
    Ok(Json(CapacityChanged {
        name: class.name().as_str().to_owned(),
        sheaf_capacity: now.sheaf_capacity,
        previous_sheaf_capacity: previous,
        tuning: now.tuning,
    }))
}

/// Parses `{"sheaf_capacity": N}`: a JSON object with exactly that field,
/// once. Serde would also take `[N]` for a struct, which is refused here;
/// parsing straight into the struct (not through a `Value`, whose map keeps
/// the last of duplicate keys) refuses a repeated field. The nesting depth
/// is bounded by serde_json's recursion limit (128).
fn parse_capacity_request(body: &[u8]) -> Result<CapacityRequest, ApiError> {
    let malformed = |detail: String| {
        ApiError::BadRequest(format!(
            "expected a JSON body like {{\"sheaf_capacity\": 64}}: {detail}"
        ))
    };
    if body.trim_ascii_start().first() != Some(&b'{') {
        // Still report a syntax error as such.
        serde_json::from_slice::<serde::de::IgnoredAny>(body)
            .map_err(|error| malformed(error.to_string()))?;
        return Err(malformed("the body is not a JSON object".to_owned()));
    }
    serde_json::from_slice(body).map_err(|error| malformed(error.to_string()))
}

/// The class named by the path, or 404.
fn class_named(name: Result<Path<String>, PathRejection>) -> Result<SizeClass, ApiError> {
    let Path(name) = name.map_err(|rejection| {
        crate::rejection_to_error(rejection.status(), rejection.body_text())
    })?;
    SizeClass::from_name(&name).ok_or_else(|| {
        ApiError::NotFound(format!(
            "no cache named {name:?}; names look like \"size-256\" (see GET /v1/caches)"
        ))
    })
}

/// An integer capacity, or 422 for integers out of range, 400 for
/// non-integers.
fn capacity_value(class: SizeClass, number: &serde_json::Number) -> Result<u64, ApiError> {
    if let Some(value) = number.as_u64() {
        return Ok(value);
    }
    let max = max_sheaf_capacity(class);
    if number.as_i64().is_some() {
        // Negative.
        return Err(out_of_range_text(class, &number.to_string()));
    }
    match number.as_f64() {
        Some(value) if value.is_finite() && value.fract() == 0.0 => {
            Err(out_of_range_text(class, &number.to_string()))
        }
        _ => Err(ApiError::BadRequest(format!(
            "sheaf_capacity must be an integer in {}..={max}, got {number}",
            CapacityOutOfRange::MIN,
        ))),
    }
}

/// 422 for a number the core's range check never sees (negative, or too
/// large for `u64`), with the core's wording of the range.
fn out_of_range_text(class: SizeClass, requested: &str) -> ApiError {
    let range = CapacityOutOfRange {
        requested: 0,
        max: max_sheaf_capacity(class),
        object_size: class.object_size(),
    }
    .to_string();
    let range = range
        .split_once(" is ")
        .map_or(range.as_str(), |(_, rest)| rest);
    ApiError::Unprocessable(format!("sheaf_capacity {requested} is {range}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn number(text: &str) -> serde_json::Number {
        serde_json::from_str(text).unwrap()
    }

    #[test]
    fn capacity_bodies_must_be_one_object_with_one_field() {
        let parse = |body: &str| parse_capacity_request(body.as_bytes());
        assert_eq!(
            parse(r#" {"sheaf_capacity": 64} "#).map(|request| request.sheaf_capacity),
            Ok(CapacityValue::Number(number("64")))
        );
        assert_eq!(
            parse(r#"{"sheaf_capacity": "auto"}"#).map(|request| request.sheaf_capacity),
            Ok(CapacityValue::Word("auto".to_owned()))
        );
        for bad in [
            "[64]",
            "64",
            "",
            r#"{"sheaf_capacity": 64, "sheaf_capacity": 65}"#,
            r#"{"sheaf_capacity": 64, "x": 1}"#,
            r#"{"sheaf_capacity": 64} {}"#,
            &"[".repeat(4000),
            &"{\"a\":".repeat(800),
        ] {
            assert!(
                matches!(parse(bad), Err(ApiError::BadRequest(_))),
                "{bad:.40} was accepted"
            );
        }
    }

    #[test]
    fn capacities_are_classified() {
        let class = SizeClass::from_name("size-256").unwrap();
        assert_eq!(capacity_value(class, &number("64")), Ok(64));
        assert_eq!(capacity_value(class, &number("0")), Ok(0)); // range checked later
        assert!(matches!(
            capacity_value(class, &number("-1")),
            Err(ApiError::Unprocessable(message)) if message.contains("-1 is outside the allowed range 1..=1024 for size-256")
        ));
        assert!(matches!(
            capacity_value(class, &number("1e30")),
            Err(ApiError::Unprocessable(_))
        ));
        assert!(matches!(
            capacity_value(class, &number("1.5")),
            Err(ApiError::BadRequest(_))
        ));
    }

    #[test]
    fn views_carry_the_name_and_counters() {
        let class = SizeClass::from_name("size-256").unwrap();
        let stats = CacheStats {
            allocations: 7,
            frees: 3,
            live_objects: 4,
            object_size: 256,
            ..CacheStats::default()
        };
        let view = CacheView::new(class, &stats);
        assert_eq!(view.name, "size-256");
        assert_eq!(view.sheaf_capacity_max, 1024);
        let largest = SizeClass::from_name("size-262144").unwrap();
        assert_eq!(CacheView::new(largest, &stats).sheaf_capacity_max, 2);
        assert_eq!((view.allocations, view.frees, view.live_objects), (7, 3, 4));
    }
}
