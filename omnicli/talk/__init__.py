"""`omni talk`: the terminal client that carries a conversation between a microphone, a realtime session and a speaker."""
