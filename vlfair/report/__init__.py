"""results.json, tables, plots and report.html for probe runs; the leaderboard over many runs."""
