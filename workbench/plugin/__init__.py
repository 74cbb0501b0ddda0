"""The plug-in surface: how a formulation is found (``registry``: the ``Formulation`` protocol,
``Problem``, ``DesignProblem``, ``SynthesisResult``, ``DesignResult``, entry points), how its
parameters are declared once (``parameters``: ``Options`` and ``option``) and the common
``synthesize`` of rule-built formulations (``closed_form``). docs/adding-a-formulation.md walks
through writing one."""
