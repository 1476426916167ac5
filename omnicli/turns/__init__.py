"""Turn-taking: deciding when a user's turn is over (silence, Smart Turn, the words), hearing it early, and when an answer may begin."""
