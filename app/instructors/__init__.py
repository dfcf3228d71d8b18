"""The instructor's side: home with class counts, gradebook, each student's work, exports."""
