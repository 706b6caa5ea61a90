from cce_knowledge.cli.main import main

raise SystemExit(main())
