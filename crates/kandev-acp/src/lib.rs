//! The client side of the Agent Client Protocol (JSON-RPC 2.0 over stdio).
