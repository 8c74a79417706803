from cryptcost.cli import main

raise SystemExit(main())
