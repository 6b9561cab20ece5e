//! The Step Functions branch timer (in progress).
