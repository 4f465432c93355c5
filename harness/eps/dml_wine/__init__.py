"""The real DirectML EP on Linux: Microsoft's DirectML.dll and the Windows onnxruntime.dll run in
a Windows host program (``host.c``) under Wine with vkd3d's Direct3D 12 on Mesa's lavapipe;
``host.py`` is its client. ``bash tools/dml-wine.sh`` sets it up."""
