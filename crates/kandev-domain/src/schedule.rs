//! Cron schedules on a named time zone's wall clock: parsing 5-field cron expressions and
//! computing the instants at which they fire, with stated rules for daylight-saving changes.
//!
//! # Syntax
//!
//! Five fields separated by whitespace: minute (0-59), hour (0-23), day of month (1-31),
//! month (1-12 or JAN-DEC) and weekday (0-7 or SUN-SAT; 0 and 7 are both Sunday). Each field
//! is `*` or a comma-separated list of items; an item is a value `a`, a range `a-b`, or a
//! stepped range `*/n` or `a-b/n`. Names are case-insensitive. `@hourly`, `@daily`,
//! `@weekly`, `@monthly` and `@yearly` stand for `0 * * * *`, `0 0 * * *`, `0 0 * * 0`,
//! `0 0 1 * *` and `0 0 1 1 *`. Anything else is refused with an error that names the field
//! and what to write instead; so is an expression longer than [`MAX_CRON_LEN`] characters and
//! one that can never fire (`0 0 31 2 *`).
//!
//! Day of month and weekday follow the classic cron rule: when both fields are restricted
//! (neither is written as exactly `*`), a day matches when EITHER matches (`0 0 1 * MON` is
//! "the 1st, and every Monday"); otherwise both must match. Note that `*/2` counts as
//! restricted here: only the literal `*` lifts the restriction.
//!
//! # Firing rules
//!
//! A schedule is evaluated on the zone's local wall-clock time, in whole minutes:
//!
//! 1. A matching local time that occurs twice (the clocks go back, a *fold*) fires once, at
//!    its first occurrence (the earlier instant). The repeated hour's second pass never
//!    fires, so `*/5 * * * *` is silent for that hour.
//! 2. A matching local time that does not exist (the clocks go forward, a *gap*) fires at the
//!    first valid minute after it, which is the instant the gap ends: in Europe/Berlin
//!    2027-03-28 02:30 does not exist, so `30 2 * * *` fires at 03:00 local (01:00 UTC).
//!    Several matching local times inside one gap fire once, at that instant, and so does a
//!    schedule whose gap-end minute matches as well (`0 2,3 * * *`): the instants a schedule
//!    yields are strictly increasing, never repeated.
//! 3. Any other local time fires at its one instant.
//!
//! The computation walks civil (local) time forward from the local time of `after`, jumping
//! over months, days and hours that cannot match, maps each matching civil minute to an
//! instant by the rules above, and keeps the instants later than `after`. Any accepted
//! expression fires at least once every 8 years (`0 0 29 2 *` skips 2100), so
//! [`next_after`] looks that far ahead and answers `None` only at the end of representable
//! time (the year 9999).
//!
//! The time-zone database is the one bundled into the binary (jiff's copy of the IANA
//! database), never the machine's, so a schedule fires at the same instants everywhere.

use std::fmt;

use jiff::civil::{Date, DateTime};
use jiff::tz::{AmbiguousOffset, TimeZone, TimeZoneDatabase};

use crate::Timestamp;

/// The longest cron expression [`Cron::parse`] reads; longer text is refused unparsed.
pub const MAX_CRON_LEN: usize = 200;

/// The longest time-zone name [`Zone::parse`] looks up (IANA names are far shorter).
pub const MAX_ZONE_NAME_LEN: usize = 64;

/// How far [`next_after`] looks ahead: 8 years and a few days, enough for any accepted
/// expression (a leap day can be 8 years from the previous one, as from 2096 to 2104).
const HORIZON_MILLIS: i64 = (8 * 366 + 2) * 24 * 60 * 60 * 1000;

/// One of the five fields of a cron expression, as named in error messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CronField {
    Minute,
    Hour,
    Day,
    Month,
    Weekday,
}

impl CronField {
    fn name(self) -> &'static str {
        match self {
            CronField::Minute => "minute",
            CronField::Hour => "hour",
            CronField::Day => "day",
            CronField::Month => "month",
            CronField::Weekday => "weekday",
        }
    }

    /// The smallest value the field accepts.
    fn min(self) -> u32 {
        match self {
            CronField::Day | CronField::Month => 1,
            CronField::Minute | CronField::Hour | CronField::Weekday => 0,
        }
    }

    /// The largest value the field accepts (7 for weekday: Sunday again).
    fn max(self) -> u32 {
        match self {
            CronField::Minute => 59,
            CronField::Hour => 23,
            CronField::Day => 31,
            CronField::Month => 12,
            CronField::Weekday => 7,
        }
    }

    /// The values `*` stands for (weekday stops at 6: 7 would repeat Sunday).
    fn star(self) -> (u32, u32) {
        match self {
            CronField::Weekday => (0, 6),
            other => (other.min(), other.max()),
        }
    }

    /// Names accepted in place of numbers, in value order starting at `names_start`.
    fn names(self) -> &'static [&'static str] {
        match self {
            CronField::Month => &[
                "JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC",
            ],
            CronField::Weekday => &["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"],
            CronField::Minute | CronField::Hour | CronField::Day => &[],
        }
    }

    /// What a value of this field may be, for error messages.
    fn expected(self) -> &'static str {
        match self {
            CronField::Minute => "a number from 0 to 59",
            CronField::Hour => "a number from 0 to 23",
            CronField::Day => "a number from 1 to 31",
            CronField::Month => "a number from 1 to 12 or a month name (JAN-DEC)",
            CronField::Weekday => "a number from 0 to 7 or a weekday name (SUN-SAT)",
        }
    }
}

impl fmt::Display for CronField {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Why a cron expression or a time-zone name was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScheduleError {
    #[error("cron expression is {len} characters long; shorten it to at most {max}")]
    TooLong { len: usize, max: usize },
    #[error(
        "cron expression is empty; write 5 fields (minute hour day month weekday), such as `0 9 * * 1-5`"
    )]
    Empty,
    #[error("cron expression must have 5 fields (minute hour day month weekday), got {got}")]
    FieldCount { got: usize },
    #[error("unknown cron macro {name}; use @hourly, @daily, @weekly, @monthly or @yearly")]
    UnknownMacro { name: String },
    #[error("{field} field has an empty list item; remove the extra comma")]
    EmptyItem { field: CronField },
    #[error("{field} value `{text}` is not valid; use {expected}", expected = .field.expected())]
    InvalidValue { field: CronField, text: String },
    #[error("{field} {value} is out of range {min}-{max}", min = .field.min(), max = .field.max())]
    OutOfRange { field: CronField, value: String },
    #[error(
        "{field} range {start}-{end} goes backwards; write the smaller value first, or split it into a list such as {start}-{max},{min}-{end}",
        min = .field.min(),
        max = .field.max()
    )]
    BackwardsRange { field: CronField, start: u32, end: u32 },
    #[error("{field} step `{step}` is not valid; use a whole number from 1 to {max}", max = .field.max())]
    InvalidStep { field: CronField, step: String },
    #[error(
        "{field} step {start}/{step} needs a range; write {start}-{max}/{step} or */{step}",
        max = .field.max()
    )]
    StepWithoutRange { field: CronField, start: String, step: String },
    #[error(
        "cron expression never fires: no selected month has a day {day}; choose an earlier day or other months"
    )]
    NeverFires { day: u32 },
    #[error("unknown time zone {name}; use an IANA name such as Europe/Berlin or UTC")]
    UnknownZone { name: String },
    #[error(
        "time zone name is {len} characters long; use an IANA name such as Europe/Berlin or UTC"
    )]
    ZoneNameTooLong { len: usize },
}

/// A parsed 5-field cron expression (minute hour day-of-month month day-of-week).
///
/// Each field is kept as a bit set: bit `v` is set when value `v` matches. Weekday 7 is
/// folded into 0 (Sunday) at parse time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cron {
    text: String,
    minutes: u64,
    hours: u64,
    days: u64,
    months: u64,
    weekdays: u64,
    /// Both day of month and weekday are restricted: a day matches when either does.
    either_day: bool,
}

impl Cron {
    /// Parses a 5-field expression or one of the macros; see the module doc for the syntax.
    pub fn parse(text: &str) -> Result<Cron, ScheduleError> {
        let len = text.chars().count();
        if len > MAX_CRON_LEN {
            return Err(ScheduleError::TooLong { len, max: MAX_CRON_LEN });
        }
        let text = text.trim();
        if text.is_empty() {
            return Err(ScheduleError::Empty);
        }
        let fields: Vec<&str> = match text.strip_prefix('@') {
            Some(name) => expand_macro(name)
                .ok_or_else(|| ScheduleError::UnknownMacro { name: text.to_string() })?
                .split_whitespace()
                .collect(),
            None => text.split_whitespace().collect(),
        };
        let [minute, hour, day, month, weekday] = fields[..] else {
            return Err(ScheduleError::FieldCount { got: fields.len() });
        };
        let cron = Cron {
            text: text.to_string(),
            minutes: parse_field(CronField::Minute, minute)?,
            hours: parse_field(CronField::Hour, hour)?,
            days: parse_field(CronField::Day, day)?,
            months: parse_field(CronField::Month, month)?,
            weekdays: parse_field(CronField::Weekday, weekday)?,
            either_day: day != "*" && weekday != "*",
        };
        cron.check_can_fire()?;
        Ok(cron)
    }

    /// The expression as written (surrounding whitespace removed).
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Refuses a day-of-month list that no selected month contains (`0 0 30 2 *`). When the
    /// weekday is restricted too, a day matches by weekday alone, so that always fires.
    fn check_can_fire(&self) -> Result<(), ScheduleError> {
        /// The longest each month can be (February in a leap year).
        const LONGEST: [u32; 12] = [31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];
        if self.either_day {
            return Ok(());
        }
        let possible = (1..=12u32).any(|month| {
            let days_in_month = (1u64 << (LONGEST[month as usize - 1] + 1)) - 1;
            self.months & (1 << month) != 0 && self.days & days_in_month != 0
        });
        if possible {
            Ok(())
        } else {
            Err(ScheduleError::NeverFires { day: self.days.trailing_zeros() })
        }
    }

    fn day_matches(&self, date: Date) -> bool {
        let by_day = self.days & (1 << date.day()) != 0;
        let by_weekday = self.weekdays & (1 << date.weekday().to_sunday_zero_offset()) != 0;
        if self.either_day { by_day || by_weekday } else { by_day && by_weekday }
    }
}

impl fmt::Display for Cron {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

fn expand_macro(name: &str) -> Option<&'static str> {
    Some(match name.to_ascii_lowercase().as_str() {
        "hourly" => "0 * * * *",
        "daily" => "0 0 * * *",
        "weekly" => "0 0 * * 0",
        "monthly" => "0 0 1 * *",
        "yearly" => "0 0 1 1 *",
        _ => return None,
    })
}

/// Parses one field into a bit set of the values it matches.
fn parse_field(field: CronField, text: &str) -> Result<u64, ScheduleError> {
    let mut bits = 0u64;
    for item in text.split(',') {
        if item.is_empty() {
            return Err(ScheduleError::EmptyItem { field });
        }
        let (range, step) = match item.split_once('/') {
            Some((range, step)) => (range, Some(step)),
            None => (item, None),
        };
        let (start, end) = if range == "*" {
            field.star()
        } else if let Some((start, end)) = range.split_once('-') {
            let (start, end) = (parse_value(field, start)?, parse_value(field, end)?);
            if start > end {
                return Err(ScheduleError::BackwardsRange { field, start, end });
            }
            (start, end)
        } else {
            let value = parse_value(field, range)?;
            if let Some(step) = step {
                return Err(ScheduleError::StepWithoutRange {
                    field,
                    start: range.to_string(),
                    step: step.to_string(),
                });
            }
            (value, value)
        };
        let step = match step {
            None => 1,
            Some(step) => parse_step(field, step)?,
        };
        let mut value = start;
        while value <= end {
            bits |= 1 << value;
            value += step;
        }
    }
    if field == CronField::Weekday && bits & (1 << 7) != 0 {
        bits = (bits & !(1 << 7)) | 1;
    }
    Ok(bits)
}

fn parse_value(field: CronField, text: &str) -> Result<u32, ScheduleError> {
    if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) {
        let out_of_range = || ScheduleError::OutOfRange { field, value: text.to_string() };
        let value: u32 = text.parse().map_err(|_| out_of_range())?;
        if value < field.min() || value > field.max() {
            return Err(out_of_range());
        }
        return Ok(value);
    }
    let names = field.names();
    let first = if field == CronField::Month { 1 } else { 0 };
    names
        .iter()
        .zip(first..)
        .find(|(name, _)| name.eq_ignore_ascii_case(text))
        .map(|(_, value)| value)
        .ok_or_else(|| ScheduleError::InvalidValue { field, text: text.to_string() })
}

fn parse_step(field: CronField, text: &str) -> Result<u32, ScheduleError> {
    let invalid = || ScheduleError::InvalidStep { field, step: text.to_string() };
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(invalid());
    }
    match text.parse::<u32>() {
        Ok(step) if (1..=field.max()).contains(&step) => Ok(step),
        _ => Err(invalid()),
    }
}

/// A named IANA zone ("Europe/Berlin", "UTC"), from the database bundled into the binary.
#[derive(Debug, Clone)]
pub struct Zone {
    name: String,
    tz: TimeZone,
}

impl Zone {
    /// Looks up an IANA name (case-insensitively) in the bundled time-zone database.
    pub fn parse(name: &str) -> Result<Zone, ScheduleError> {
        let name = name.trim();
        let len = name.chars().count();
        if len > MAX_ZONE_NAME_LEN {
            return Err(ScheduleError::ZoneNameTooLong { len });
        }
        let unknown = || ScheduleError::UnknownZone { name: name.to_string() };
        if name.is_empty() {
            return Err(unknown());
        }
        let tz = TimeZoneDatabase::bundled().get(name).map_err(|_| unknown())?;
        if tz.is_unknown() {
            return Err(unknown());
        }
        let name = tz.iana_name().unwrap_or(name).to_string();
        Ok(Zone { name, tz })
    }

    /// The zone's canonical IANA name ("europe/berlin" parses to "Europe/Berlin").
    pub fn name(&self) -> &str {
        &self.name
    }
}

/// The first firing instant strictly after `after`, or `None` if there is none within the
/// next 8 years (only near the end of representable time: every accepted expression fires at
/// least that often).
pub fn next_after(cron: &Cron, zone: &Zone, after: Timestamp) -> Option<Timestamp> {
    // Clamped first, so an `after` before representable time still looks ahead from its start.
    let after = to_jiff(after)?;
    let until = Timestamp(after.as_millisecond().saturating_add(HORIZON_MILLIS));
    Firings::new(cron, zone, Timestamp(after.as_millisecond()), until)?.next()
}

/// Every firing instant in (`after`, `until`], oldest first, at most `limit` of them.
pub fn between(
    cron: &Cron,
    zone: &Zone,
    after: Timestamp,
    until: Timestamp,
    limit: usize,
) -> Vec<Timestamp> {
    if limit == 0 || until <= after {
        return Vec::new();
    }
    match Firings::new(cron, zone, after, until) {
        Some(firings) => firings.take(limit).collect(),
        None => Vec::new(),
    }
}

/// A civil minute being walked. `hour` may be 24 and `minute` 60 after a step forward: the
/// walk in [`Firings::next_match`] carries them over into the next hour or day.
/// Ordered by date, then hour, then minute, which orders carried-over values correctly too.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Cursor {
    date: Date,
    hour: u32,
    minute: u32,
}

impl Cursor {
    /// The cursor at the whole minute of `dt`, or at the following one when `dt` has seconds.
    fn at_or_after(dt: DateTime) -> Cursor {
        let cursor = Cursor::at(dt);
        if dt.second() == 0 && dt.subsec_nanosecond() == 0 { cursor } else { cursor.next_minute() }
    }

    /// The cursor at the whole minute containing `dt`.
    fn at(dt: DateTime) -> Cursor {
        Cursor {
            date: dt.date(),
            hour: dt.hour().unsigned_abs().into(),
            minute: dt.minute().unsigned_abs().into(),
        }
    }

    fn next_minute(self) -> Cursor {
        Cursor { minute: self.minute + 1, ..self }
    }
}

/// The firing instants of one schedule in (`after`, `until`], oldest first.
struct Firings<'a> {
    cron: &'a Cron,
    tz: &'a TimeZone,
    after: jiff::Timestamp,
    until: jiff::Timestamp,
    /// The walk stops after this local date: no later civil minute fires by `until`.
    last_date: Date,
    cursor: Option<Cursor>,
    /// The last instant yielded; later ones must be strictly greater (rule 2).
    last: Option<jiff::Timestamp>,
    /// Walk steps taken, so tests can hold the walk to its bound.
    steps: u64,
}

impl<'a> Firings<'a> {
    fn new(
        cron: &'a Cron,
        zone: &'a Zone,
        after: Timestamp,
        until: Timestamp,
    ) -> Option<Firings<'a>> {
        let after = to_jiff(after)?;
        let until = to_jiff(until)?;
        let tz = &zone.tz;
        let last_date = tz.to_datetime(until).date();
        // Local time runs backwards in a fold, so a firing at or before `until` can have a
        // later local time than `until` has: keep a day's margin (instants are checked too).
        let last_date = last_date.tomorrow().unwrap_or(last_date);
        Some(Firings {
            cron,
            tz,
            after,
            until,
            last_date,
            // A whole minute before `after`'s local time fires at or before `after` (in a fold's
            // second pass, at its first occurrence): start at the next one.
            cursor: Some(Cursor::at_or_after(tz.to_datetime(after))),
            last: None,
            steps: 0,
        })
    }

    /// The first civil minute at or after `from` that the expression matches, on or before
    /// `last_date`. Months, days and hours that cannot match are skipped whole, and a
    /// matching hour jumps straight to its next matching minute, so a year costs a few
    /// hundred steps at most.
    fn next_match(&mut self, from: Cursor) -> Option<Cursor> {
        let cron = self.cron;
        let Cursor { mut date, mut hour, mut minute } = from;
        loop {
            self.steps += 1;
            if date > self.last_date {
                return None;
            }
            let month = u32::from(date.month().unsigned_abs());
            if cron.months & (1 << month) == 0 {
                date = next_month_start(cron.months, date)?;
                (hour, minute) = (0, 0);
                continue;
            }
            if !cron.day_matches(date) {
                date = date.tomorrow().ok()?;
                (hour, minute) = (0, 0);
                continue;
            }
            let Some(next_hour) = next_bit(cron.hours, hour) else {
                date = date.tomorrow().ok()?;
                (hour, minute) = (0, 0);
                continue;
            };
            if next_hour != hour {
                (hour, minute) = (next_hour, 0);
            }
            let Some(next_minute) = next_bit(cron.minutes, minute) else {
                (hour, minute) = (hour + 1, 0);
                continue;
            };
            return Some(Cursor { date, hour, minute: next_minute });
        }
    }

    /// The instant at which the civil minute `at` fires (rules 1-3), and where the walk
    /// resumes after it.
    fn resolve(&self, at: Cursor) -> Option<(jiff::Timestamp, Cursor)> {
        // `next_match` only yields hours 0-23 and minutes 0-59.
        let hour = i8::try_from(at.hour).ok()?;
        let minute = i8::try_from(at.minute).ok()?;
        let dt = at.date.at(hour, minute, 0, 0);
        match self.tz.to_ambiguous_timestamp(dt).offset() {
            AmbiguousOffset::Unambiguous { offset } => {
                Some((offset.to_timestamp(dt).ok()?, at.next_minute()))
            }
            // Rule 1: the first occurrence; the second pass maps to the same instants.
            AmbiguousOffset::Fold { before, .. } => {
                Some((before.to_timestamp(dt).ok()?, at.next_minute()))
            }
            // Rule 2: the first whole minute after the gap. `dt` read with the offset after
            // the gap is an instant before the transition, so the next transition is the
            // one that opened the gap.
            AmbiguousOffset::Gap { before, after } => {
                let probe = after.to_timestamp(dt).ok()?;
                let Some(transition) = self.tz.following(probe).next() else {
                    return Some((before.to_timestamp(dt).ok()?, at.next_minute()));
                };
                let end = Cursor::at_or_after(self.tz.to_datetime(transition.timestamp()));
                let end_hour = i8::try_from(end.hour).ok()?;
                let end_minute = i8::try_from(end.minute).ok()?;
                let end_dt = end.date.at(end_hour, end_minute, 0, 0);
                let instant = self.tz.to_ambiguous_timestamp(end_dt).earlier().ok()?;
                // The gap's end minute itself fires at this same instant if it matches:
                // resume after it (and never behind `at`, whatever the zone data says).
                Some((instant, end.next_minute().max(at.next_minute())))
            }
        }
    }
}

impl Iterator for Firings<'_> {
    type Item = Timestamp;

    fn next(&mut self) -> Option<Timestamp> {
        loop {
            let from = self.cursor.take()?;
            let at = self.next_match(from)?;
            let (instant, resume) = self.resolve(at)?;
            // Civil minutes map to non-decreasing instants, so nothing later can be in range.
            if instant > self.until {
                return None;
            }
            self.cursor = Some(resume);
            let fresh = self.last.is_none_or(|last| instant > last);
            if instant > self.after && fresh {
                self.last = Some(instant);
                return Some(Timestamp(instant.as_millisecond()));
            }
        }
    }
}

/// `millis` as a jiff instant, clamped to jiff's range; `None` past its end.
fn to_jiff(at: Timestamp) -> Option<jiff::Timestamp> {
    if at.0 >= jiff::Timestamp::MAX.as_millisecond() {
        return (at.0 == jiff::Timestamp::MAX.as_millisecond()).then_some(jiff::Timestamp::MAX);
    }
    if at.0 <= jiff::Timestamp::MIN.as_millisecond() {
        return Some(jiff::Timestamp::MIN);
    }
    jiff::Timestamp::from_millisecond(at.0).ok()
}

/// The lowest set bit at or above `from`.
fn next_bit(bits: u64, from: u32) -> Option<u32> {
    let masked = bits & u64::MAX.checked_shl(from)?;
    (masked != 0).then(|| masked.trailing_zeros())
}

/// The first day of the next selected month after `date`'s month.
fn next_month_start(months: u64, date: Date) -> Option<Date> {
    let month = u32::from(date.month().unsigned_abs());
    let (year, month) = match next_bit(months, month + 1) {
        Some(next) => (date.year(), next),
        None => (date.year().checked_add(1)?, next_bit(months, 1)?),
    };
    Date::new(year, i8::try_from(month).ok()?, 1).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Milliseconds of an RFC 3339 instant such as `2027-03-28T01:00:00Z`.
    fn utc(text: &str) -> Timestamp {
        Timestamp(text.parse::<jiff::Timestamp>().unwrap().as_millisecond())
    }

    fn cron(text: &str) -> Cron {
        Cron::parse(text).unwrap()
    }

    fn zone(name: &str) -> Zone {
        Zone::parse(name).unwrap()
    }

    fn next(expr: &str, zone_name: &str, after: &str) -> Option<Timestamp> {
        next_after(&cron(expr), &zone(zone_name), utc(after))
    }

    fn all(expr: &str, zone_name: &str, after: &str, until: &str) -> Vec<Timestamp> {
        between(&cron(expr), &zone(zone_name), utc(after), utc(until), usize::MAX)
    }

    fn utcs(texts: &[&str]) -> Vec<Timestamp> {
        texts.iter().map(|text| utc(text)).collect()
    }

    fn parse_err(text: &str) -> String {
        Cron::parse(text).unwrap_err().to_string()
    }

    /// The values set in a bit set, for readable assertions.
    fn values(bits: u64) -> Vec<u32> {
        (0..64).filter(|v| bits & (1 << v) != 0).collect()
    }

    #[test]
    fn parses_fields_ranges_lists_and_steps() {
        let c = cron("0,30 9-17 1,15 */3 1-5");
        assert_eq!(values(c.minutes), [0, 30]);
        assert_eq!(values(c.hours), (9..=17).collect::<Vec<_>>());
        assert_eq!(values(c.days), [1, 15]);
        assert_eq!(values(c.months), [1, 4, 7, 10]);
        assert_eq!(values(c.weekdays), [1, 2, 3, 4, 5]);
        assert_eq!(c.as_str(), "0,30 9-17 1,15 */3 1-5");

        let c = cron("  10-40/15 */6 * * *  ");
        assert_eq!(values(c.minutes), [10, 25, 40]);
        assert_eq!(values(c.hours), [0, 6, 12, 18]);
        assert_eq!(values(c.days), (1..=31).collect::<Vec<_>>());
        assert_eq!(values(c.weekdays), (0..=6).collect::<Vec<_>>());
        assert_eq!(c.as_str(), "10-40/15 */6 * * *");
    }

    #[test]
    fn parses_month_and_weekday_names_in_any_case() {
        let c = cron("0 0 * jan,Jun-aug MON-fri");
        assert_eq!(values(c.months), [1, 6, 7, 8]);
        assert_eq!(values(c.weekdays), [1, 2, 3, 4, 5]);
        let c = cron("0 0 * DEC sun,SAT");
        assert_eq!(values(c.months), [12]);
        assert_eq!(values(c.weekdays), [0, 6]);
    }

    #[test]
    fn weekday_seven_is_sunday() {
        assert_eq!(values(cron("0 0 * * 7").weekdays), [0]);
        assert_eq!(values(cron("0 0 * * 5-7").weekdays), [0, 5, 6]);
        // 2027-01-03 is a Sunday.
        assert_eq!(
            next("0 12 * * 7", "UTC", "2027-01-01T00:00:00Z"),
            Some(utc("2027-01-03T12:00:00Z"))
        );
    }

    #[test]
    fn macros_expand_to_their_fields() {
        for (name, fields) in [
            ("@hourly", "0 * * * *"),
            ("@daily", "0 0 * * *"),
            ("@weekly", "0 0 * * 0"),
            ("@monthly", "0 0 1 * *"),
            ("@YEARLY", "0 0 1 1 *"),
        ] {
            let m = cron(name);
            let f = cron(fields);
            assert_eq!(m.as_str(), name);
            assert_eq!(Cron { text: fields.into(), ..m }, f, "{name}");
        }
        assert_eq!(
            next("@weekly", "UTC", "2027-01-01T00:00:00Z"),
            Some(utc("2027-01-03T00:00:00Z"))
        );
    }

    #[test]
    fn refuses_bad_expressions_with_what_to_do() {
        assert_eq!(
            parse_err("* * *"),
            "cron expression must have 5 fields (minute hour day month weekday), got 3"
        );
        assert_eq!(
            parse_err("0 0 * * * *"),
            "cron expression must have 5 fields (minute hour day month weekday), got 6"
        );
        assert_eq!(parse_err("75 * * * *"), "minute 75 is out of range 0-59");
        assert_eq!(parse_err("* 24 * * *"), "hour 24 is out of range 0-23");
        assert_eq!(parse_err("* * 0 * *"), "day 0 is out of range 1-31");
        assert_eq!(parse_err("* * * 13 *"), "month 13 is out of range 1-12");
        assert_eq!(parse_err("* * * * 8"), "weekday 8 is out of range 0-7");
        assert_eq!(parse_err("99999999999 * * * *"), "minute 99999999999 is out of range 0-59");
        assert_eq!(
            parse_err("* * * * FUNDAY"),
            "weekday value `FUNDAY` is not valid; use a number from 0 to 7 or a weekday name (SUN-SAT)"
        );
        assert_eq!(
            parse_err("* * * JAN-MON *"),
            "month value `MON` is not valid; use a number from 1 to 12 or a month name (JAN-DEC)"
        );
        assert_eq!(
            parse_err("-5 * * * *"),
            "minute value `` is not valid; use a number from 0 to 59"
        );
        assert_eq!(
            parse_err("* 20-5 * * *"),
            "hour range 20-5 goes backwards; write the smaller value first, or split it into a list such as 20-23,0-5"
        );
        assert_eq!(
            parse_err("*/0 * * * *"),
            "minute step `0` is not valid; use a whole number from 1 to 59"
        );
        assert_eq!(
            parse_err("*/x * * * *"),
            "minute step `x` is not valid; use a whole number from 1 to 59"
        );
        assert_eq!(
            parse_err("5/15 * * * *"),
            "minute step 5/15 needs a range; write 5-59/15 or */15"
        );
        assert_eq!(
            parse_err("1,,2 * * * *"),
            "minute field has an empty list item; remove the extra comma"
        );
        assert_eq!(
            parse_err("@reboot"),
            "unknown cron macro @reboot; use @hourly, @daily, @weekly, @monthly or @yearly"
        );
        assert_eq!(
            parse_err("   "),
            "cron expression is empty; write 5 fields (minute hour day month weekday), such as `0 9 * * 1-5`"
        );
        assert_eq!(
            parse_err("0 0 30,31 2 *"),
            "cron expression never fires: no selected month has a day 30; choose an earlier day or other months"
        );
        let long = format!("0 0 * * {}", "1,".repeat(100));
        assert_eq!(
            parse_err(&long),
            format!("cron expression is {} characters long; shorten it to at most 200", long.len())
        );
        // One under the bound is read (and here refused for its content, not its length).
        let just_fits = format!("{}0 0 * * *", " ".repeat(MAX_CRON_LEN - 9));
        assert_eq!(just_fits.len(), MAX_CRON_LEN);
        assert!(Cron::parse(&just_fits).is_ok());
    }

    #[test]
    fn day_and_weekday_match_either_when_both_are_restricted() {
        // The 1st of the month or any Monday. 2027-02-01 is a Monday; 2027-02-08 the next.
        let c = cron("0 9 1 * MON");
        assert!(c.either_day);
        let z = zone("UTC");
        let got = between(&c, &z, utc("2027-01-30T00:00:00Z"), utc("2027-03-02T00:00:00Z"), 100);
        assert_eq!(
            got,
            utcs(&[
                "2027-02-01T09:00:00Z",
                "2027-02-08T09:00:00Z",
                "2027-02-15T09:00:00Z",
                "2027-02-22T09:00:00Z",
                "2027-03-01T09:00:00Z",
            ])
        );
        // With one of them `*`, both must match: only the 1st, or only Mondays.
        assert_eq!(
            all("0 9 1 * *", "UTC", "2027-01-30T00:00:00Z", "2027-03-02T00:00:00Z"),
            utcs(&["2027-02-01T09:00:00Z", "2027-03-01T09:00:00Z"])
        );
        assert_eq!(
            all("0 9 * * MON", "UTC", "2027-02-02T00:00:00Z", "2027-02-16T00:00:00Z"),
            utcs(&["2027-02-08T09:00:00Z", "2027-02-15T09:00:00Z"])
        );
        // A day that no month has is still fine when the weekday can match.
        // Fridays in February: 2027-02-05 is the first.
        assert_eq!(
            next("0 0 31 2 FRI", "UTC", "2027-01-01T00:00:00Z"),
            Some(utc("2027-02-05T00:00:00Z"))
        );
    }

    #[test]
    fn next_after_plain_cases() {
        assert_eq!(
            next("* * * * *", "UTC", "2027-05-05T10:20:30Z"),
            Some(utc("2027-05-05T10:21:00Z"))
        );
        // Strictly after: a firing exactly at `after` is not returned again.
        assert_eq!(
            next("* * * * *", "UTC", "2027-05-05T10:21:00Z"),
            Some(utc("2027-05-05T10:22:00Z"))
        );
        assert_eq!(
            next("0 9 * * 1-5", "UTC", "2027-05-07T09:00:00Z"), // a Friday
            Some(utc("2027-05-10T09:00:00Z"))
        );
        assert_eq!(
            next("59 23 31 12 *", "UTC", "2027-01-01T00:00:00Z"),
            Some(utc("2027-12-31T23:59:00Z"))
        );
        // Local wall-clock time: 09:00 in Berlin is 07:00 UTC in summer, 08:00 in winter.
        assert_eq!(
            next("0 9 * * *", "Europe/Berlin", "2027-07-01T12:00:00Z"),
            Some(utc("2027-07-02T07:00:00Z"))
        );
        assert_eq!(
            next("0 9 * * *", "Europe/Berlin", "2027-01-01T12:00:00Z"),
            Some(utc("2027-01-02T08:00:00Z"))
        );
        // `after` in the middle of a minute in a zone with a half-hour offset.
        assert_eq!(
            next("0 0 * * *", "Asia/Kolkata", "2027-01-01T18:29:59.999Z"),
            Some(utc("2027-01-01T18:30:00Z"))
        );
    }

    #[test]
    fn i47_3_berlin_spring_forward_gap_fires_at_gap_end() {
        // 2027-03-28: 02:00 CET becomes 03:00 CEST at 01:00 UTC; 02:00-02:59 do not exist.
        assert_eq!(
            next("30 2 * * *", "Europe/Berlin", "2027-03-27T12:00:00Z"),
            Some(utc("2027-03-28T01:00:00Z"))
        );
        assert_eq!(
            all("30 2 * * *", "Europe/Berlin", "2027-03-26T12:00:00Z", "2027-03-29T12:00:00Z"),
            utcs(&["2027-03-27T01:30:00Z", "2027-03-28T01:00:00Z", "2027-03-29T00:30:00Z",])
        );
        assert_eq!(
            next("0 3 * * *", "Europe/Berlin", "2027-03-27T12:00:00Z"),
            Some(utc("2027-03-28T01:00:00Z"))
        );
    }

    #[test]
    fn i47_3_berlin_several_gap_minutes_fire_once() {
        // 02:00, 02:15, 02:30 and 02:45 are all in the gap: one firing at its end.
        assert_eq!(
            all("*/15 2 * * *", "Europe/Berlin", "2027-03-27T12:00:00Z", "2027-03-29T00:20:00Z"),
            utcs(&["2027-03-28T01:00:00Z", "2027-03-29T00:00:00Z", "2027-03-29T00:15:00Z",])
        );
        // The gap-end minute (03:00) matches too: still one firing.
        assert_eq!(
            all("0 2,3 * * *", "Europe/Berlin", "2027-03-27T12:00:00Z", "2027-03-29T12:00:00Z"),
            utcs(&["2027-03-28T01:00:00Z", "2027-03-29T00:00:00Z", "2027-03-29T01:00:00Z",])
        );
        // Every minute across the gap: 01:59 CET, then 03:00 CEST, 03:01 CEST.
        assert_eq!(
            all("* * * * *", "Europe/Berlin", "2027-03-28T00:58:00Z", "2027-03-28T01:01:00Z"),
            utcs(&["2027-03-28T00:59:00Z", "2027-03-28T01:00:00Z", "2027-03-28T01:01:00Z",])
        );
        // `after` exactly at the gap's end: the gap's firing is not after it.
        assert_eq!(
            next("30 2 * * *", "Europe/Berlin", "2027-03-28T01:00:00Z"),
            Some(utc("2027-03-29T00:30:00Z"))
        );
    }

    #[test]
    fn i47_3_berlin_fall_back_fold_fires_once_at_first_occurrence() {
        // 2027-10-31: 03:00 CEST becomes 02:00 CET at 01:00 UTC; 02:00-02:59 happen twice.
        assert_eq!(
            next("30 2 * * *", "Europe/Berlin", "2027-10-30T12:00:00Z"),
            Some(utc("2027-10-31T00:30:00Z"))
        );
        assert_eq!(
            next("30 2 * * *", "Europe/Berlin", "2027-10-31T00:30:00Z"),
            Some(utc("2027-11-01T01:30:00Z"))
        );
        // Hourly across the fold: 02:00 fires at its first occurrence (00:00 UTC) only, then
        // 03:00 CET is 02:00 UTC.
        assert_eq!(
            all("0 * * * *", "Europe/Berlin", "2027-10-30T23:30:00Z", "2027-10-31T03:30:00Z"),
            utcs(&["2027-10-31T00:00:00Z", "2027-10-31T02:00:00Z", "2027-10-31T03:00:00Z",])
        );
    }

    #[test]
    fn i47_3_after_inside_the_fold_second_pass_does_not_fire_again() {
        // 01:10 UTC is 02:10 CET, the second pass: 02:15..02:55 already fired in the first.
        assert_eq!(
            next("*/5 * * * *", "Europe/Berlin", "2027-10-31T01:10:00Z"),
            Some(utc("2027-10-31T02:00:00Z"))
        );
        assert_eq!(
            next("* * * * *", "Europe/Berlin", "2027-10-31T01:59:30Z"),
            Some(utc("2027-10-31T02:00:00Z"))
        );
        // 00:10 UTC is 02:10 CEST, the first pass: the next five minutes fire as usual.
        assert_eq!(
            next("*/5 * * * *", "Europe/Berlin", "2027-10-31T00:10:00Z"),
            Some(utc("2027-10-31T00:15:00Z"))
        );
        // Right at the end of the first pass: the second pass is skipped.
        assert_eq!(
            all("*/30 * * * *", "Europe/Berlin", "2027-10-31T00:29:00Z", "2027-10-31T02:30:00Z"),
            utcs(&["2027-10-31T00:30:00Z", "2027-10-31T02:00:00Z", "2027-10-31T02:30:00Z",])
        );
    }

    #[test]
    fn i47_3_new_york_both_changes_of_2027() {
        // 2027-03-14: 02:00 EST becomes 03:00 EDT at 07:00 UTC.
        assert_eq!(
            all("30 2 * * *", "America/New_York", "2027-03-12T12:00:00Z", "2027-03-15T12:00:00Z"),
            utcs(&["2027-03-13T07:30:00Z", "2027-03-14T07:00:00Z", "2027-03-15T06:30:00Z",])
        );
        // 2027-11-07: 02:00 EDT becomes 01:00 EST at 06:00 UTC; 01:00-01:59 happen twice.
        assert_eq!(
            all("30 1 * * *", "America/New_York", "2027-11-05T12:00:00Z", "2027-11-08T12:00:00Z"),
            utcs(&["2027-11-06T05:30:00Z", "2027-11-07T05:30:00Z", "2027-11-08T06:30:00Z",])
        );
        assert_eq!(
            next("0 * * * *", "America/New_York", "2027-11-07T05:30:00Z"),
            Some(utc("2027-11-07T07:00:00Z"))
        );
    }

    #[test]
    fn i47_3_between_covers_a_whole_year_of_both_changes() {
        // Sundays at 02:00 in Berlin through 2027 (local time). 2027-01-03 is the first Sunday.
        let got =
            all("0 2 * * SUN", "Europe/Berlin", "2026-12-31T23:00:00Z", "2027-12-31T23:00:00Z");
        assert_eq!(got.len(), 52);
        assert_eq!(got[0], utc("2027-01-03T01:00:00Z"));
        assert!(got.windows(2).all(|w| w[0] < w[1]));
        let around = |day: &str| {
            let i = got.iter().position(|t| *t == utc(day)).unwrap();
            got[i - 1..=i + 1].to_vec()
        };
        assert_eq!(
            around("2027-03-28T01:00:00Z"),
            utcs(&[
                "2027-03-21T01:00:00Z",
                "2027-03-28T01:00:00Z", // 02:00 does not exist: the gap's end, 03:00 CEST
                "2027-04-04T00:00:00Z",
            ])
        );
        assert_eq!(
            around("2027-10-31T00:00:00Z"),
            utcs(&[
                "2027-10-24T00:00:00Z",
                "2027-10-31T00:00:00Z", // 02:00 CEST, the first of the two
                "2027-11-07T01:00:00Z",
            ])
        );
        assert_eq!(got[51], utc("2027-12-26T01:00:00Z"));
    }

    #[test]
    fn i47_3_between_honors_limit_and_bounds() {
        let c = cron("30 2 * * *");
        let z = zone("Europe/Berlin");
        let (after, until) = (utc("2027-03-26T12:00:00Z"), utc("2027-03-29T12:00:00Z"));
        assert_eq!(
            between(&c, &z, after, until, 2),
            utcs(&["2027-03-27T01:30:00Z", "2027-03-28T01:00:00Z"])
        );
        assert!(between(&c, &z, after, until, 0).is_empty());
        assert!(between(&c, &z, until, after, 10).is_empty());
        // `until` is inclusive, `after` exclusive.
        assert_eq!(
            between(&c, &z, utc("2027-03-27T01:30:00Z"), utc("2027-03-28T01:00:00Z"), 10),
            utcs(&["2027-03-28T01:00:00Z"])
        );
    }

    #[test]
    fn leap_day_only_expression_is_found_within_the_horizon() {
        let c = cron("0 0 29 2 *");
        let z = zone("UTC");
        assert_eq!(
            next_after(&c, &z, utc("2027-01-01T00:00:00Z")),
            Some(utc("2028-02-29T00:00:00Z"))
        );
        // 2100 is not a leap year: eight years from 2096 to 2104.
        let mut firings = Firings::new(
            &c,
            &z,
            utc("2096-03-01T00:00:00Z"),
            Timestamp(utc("2096-03-01T00:00:00Z").0 + HORIZON_MILLIS),
        )
        .unwrap();
        assert_eq!(firings.next(), Some(utc("2104-02-29T00:00:00Z")));
        assert!(firings.steps < 1_000, "walk took {} steps", firings.steps);
    }

    #[test]
    fn sparse_expressions_walk_few_steps() {
        let z = zone("Europe/Berlin");
        for (expr, after, expected) in [
            ("59 23 31 12 *", "2027-01-01T00:00:00Z", "2027-12-31T22:59:00Z"),
            ("0 0 1 1 *", "2027-01-01T00:00:00Z", "2027-12-31T23:00:00Z"),
            ("0 0 29 2 *", "2027-01-01T00:00:00Z", "2028-02-28T23:00:00Z"),
            ("30 2 * * *", "2027-03-27T12:00:00Z", "2027-03-28T01:00:00Z"),
        ] {
            let c = cron(expr);
            let after = utc(after);
            let mut firings =
                Firings::new(&c, &z, after, Timestamp(after.0 + HORIZON_MILLIS)).unwrap();
            assert_eq!(firings.next(), Some(utc(expected)), "{expr}");
            assert!(firings.steps < 1_000, "{expr}: {} steps", firings.steps);
        }
    }

    #[test]
    fn unknown_zone_is_refused_with_a_hint() {
        assert_eq!(
            Zone::parse("Mars/Base").unwrap_err().to_string(),
            "unknown time zone Mars/Base; use an IANA name such as Europe/Berlin or UTC"
        );
        assert_eq!(
            Zone::parse("").unwrap_err().to_string(),
            "unknown time zone ; use an IANA name such as Europe/Berlin or UTC"
        );
        assert!(matches!(
            Zone::parse(&"A".repeat(65)),
            Err(ScheduleError::ZoneNameTooLong { len: 65 })
        ));
        assert_eq!(zone("europe/berlin").name(), "Europe/Berlin");
        assert_eq!(zone("UTC").name(), "UTC");
    }

    #[test]
    fn out_of_range_instants_give_nothing() {
        let c = cron("* * * * *");
        let z = zone("UTC");
        assert_eq!(next_after(&c, &z, Timestamp(i64::MAX)), None);
        // The last representable minute has no minute after it.
        let max = jiff::Timestamp::MAX.as_millisecond();
        assert_eq!(next_after(&c, &z, Timestamp(max - 1)), None);
        // Before the start of representable time: the first whole minute jiff can represent.
        let min = jiff::Timestamp::MIN.as_millisecond();
        let first = next_after(&c, &z, Timestamp(i64::MIN)).unwrap();
        assert!(first.0 > min && first.0 - min <= 60_000, "{first:?}");
        assert_eq!(first.0.rem_euclid(60_000), 0);
    }
}
