//! The DynamoDB branch store (in progress).
