from lakeward.cli import main

main()
