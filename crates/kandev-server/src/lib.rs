//! Kandev's HTTP + WebSocket API: router, action handlers, ApiError.
