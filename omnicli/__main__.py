"""`python -m omnicli`: the same entry point as the `omni` command."""

from omnicli.cli.main import main

if __name__ == "__main__":  # vLLM's engine process (spawned) imports this module again
    main()
