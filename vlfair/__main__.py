from vlfair.cli import main

raise SystemExit(main())
