from ba_mcp.cli import main

main()
