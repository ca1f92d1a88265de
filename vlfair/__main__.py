from vlfair.cli import console

console()
