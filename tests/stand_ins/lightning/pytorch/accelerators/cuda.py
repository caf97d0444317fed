import torch


class MisconfigurationException(Exception):
    pass


class CUDAAccelerator:
    def setup_device(self, device):
        if device.type != "cuda":
            raise MisconfigurationException(f"Device should be GPU, got {device} instead")
        torch.cuda.set_device(device)

    @staticmethod
    def get_parallel_devices(devices):
        return [torch.device("cuda", i) for i in devices]
