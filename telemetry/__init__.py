"""What Claude Code reports about itself over OTLP (sessions, cost, tokens, lines changed, tool
decisions), kept per client key for a retention period beside the gateway's own figures."""
