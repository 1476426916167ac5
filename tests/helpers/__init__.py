"""What the tests share: scripted engines, in-memory harnesses, real-server starters, speech judges."""
