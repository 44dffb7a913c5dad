"""`rabbitproof check FILE` (command.py): a user's setup file (setup_file.py) as a spec configuration
(setup_model.py), explored with an observer that answers the delivery questions (questions.py,
answers.py), what-if advice (whatif.py) and the report (report.py)."""
