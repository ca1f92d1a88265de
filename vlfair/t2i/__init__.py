"""Text-to-image word influence: transmuters, generators (+ image cache), group classifier."""
