"""Where invocations run: `local` (processes + GPU slots on this machine) and, later,
`kubernetes` (one Job per invocation). Each implements `domain.ports.Backend`."""
