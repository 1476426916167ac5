from omnicli.cli.main import main

if __name__ == "__main__":  # vLLM's engine process (spawned) imports this module again
    main()
