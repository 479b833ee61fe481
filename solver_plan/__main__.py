"""python -m solver_plan"""
import sys

from solver_plan.cli import main

sys.exit(main())
