from omnicli.cli.main import main

main()
