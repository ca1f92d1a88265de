"""Dataset card templates rendered by ``vlfair prepare``; installed as ``vlfair._cards``."""
