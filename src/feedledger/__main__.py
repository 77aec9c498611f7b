from feedledger.cli.main import main

main()
