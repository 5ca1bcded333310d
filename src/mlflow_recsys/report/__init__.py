"""What people read of a comparison: text, markdown, HTML, LaTeX and plots of a ComparisonReport."""
