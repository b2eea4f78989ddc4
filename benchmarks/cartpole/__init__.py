"""The paper's CartPole study: the physics and its variants (cartpole.py), the peers
(peers.py), the experiment (experiment.py), its report (report.py) and command (run.py)."""
