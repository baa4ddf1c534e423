from aiqueue.cli import main

raise SystemExit(main())
