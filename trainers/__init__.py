"""Trainers: advantage estimators, losses, the training loop, SFT, evaluation. Import torch lazily."""
